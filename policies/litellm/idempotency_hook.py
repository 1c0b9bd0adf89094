# LiteLLM proxy pre-call hook (agentroom): copy the client's Idempotency-Key header onto the
# upstream call. Stock LiteLLM (1.108.7) forwards only `x-*` client headers, so without it the
# upstream never sees the key. Load it with `litellm_settings: {callbacks:
# idempotency_hook.proxy_handler_instance}` from the folder of this file.
from litellm.integrations.custom_logger import CustomLogger


class ForwardIdempotencyKey(CustomLogger):
    async def async_pre_call_hook(self, user_api_key_dict, cache, data, call_type):
        headers = (data.get("proxy_server_request") or {}).get("headers") or {}
        if not headers:
            headers = (data.get("metadata") or {}).get("headers") or {}
        key = next((v for k, v in headers.items() if k.lower() == "idempotency-key"), None)
        if key:
            fwd = dict(data.get("headers") or {})
            fwd["Idempotency-Key"] = key
            data["headers"] = fwd
        return data


proxy_handler_instance = ForwardIdempotencyKey()
