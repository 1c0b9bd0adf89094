// agentroom board: reads the REST API under /v1/rooms/{room} with a bearer token kept in
// sessionStorage (no cookies), renders the Room, and follows the notification stream with
// fetch + a stream reader (EventSource cannot send Authorization), resuming with
// Last-Event-ID. Every string from the server is inserted as text (textContent and text
// nodes), never as HTML.
"use strict";
(() => {
  const TOKEN = "agentroom.token";
  const ROOM = "agentroom.room";
  const COLUMNS = ["backlog", "todo", "in_progress", "done"];

  const $ = (id) => document.getElementById(id);

  /** An element with fixed attributes and children (strings become text nodes). */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value !== undefined && value !== null) node.setAttribute(name, String(value));
    }
    for (const child of children) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  /** Integer micros as dollars, without floating point: 1234567 -> "$1.234567". */
  function usd(micros) {
    const n = Number(micros || 0);
    const sign = n < 0 ? "-" : "";
    const abs = Math.abs(n);
    const whole = Math.floor(abs / 1000000);
    const frac = String(abs % 1000000).padStart(6, "0");
    return `${sign}$${whole}.${frac}`;
  }

  function when(millis) {
    const date = new Date(Number(millis));
    return Number.isNaN(date.getTime()) ? "" : date.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
  }

  let session = null; // { room, token }
  let stream = null; // AbortController of the live stream
  let refreshTimer = null;
  let roles = []; // the caller's roles in the Room, as the last refresh read them
  let lastTyped = 0; // when someone last typed in one of the board's forms

  function showError(message) {
    const box = $("error");
    box.textContent = message;
    box.hidden = !message;
  }

  class HttpError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function get(path) {
    const response = await fetch(`/v1/rooms/${encodeURIComponent(session.room)}${path}`, {
      headers: { Authorization: `Bearer ${session.token}` },
      cache: "no-store",
      credentials: "omit",
    });
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    if (!response.ok) {
      const message = body && typeof body.message === "string" ? body.message : `HTTP ${response.status}`;
      throw new HttpError(response.status, message);
    }
    return body;
  }

  /**
   * The board's only writes: the owner's correction of an objective (an owner_correction
   * event, O14, R6) and a reviewer's human review (R1, R2, R7). JSON with the session's
   * bearer token and a fresh Idempotency-Key, so a retried click is decided once.
   */
  /** A fresh Idempotency-Key: a UUID, also outside a secure context (plain HTTP on a LAN). */
  function freshKey() {
    if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  async function send(path, body, key) {
    const response = await fetch(`/v1/rooms/${encodeURIComponent(session.room)}${path}`, {
      method: "POST",
      headers: {
        Authorization: `Bearer ${session.token}`,
        "Content-Type": "application/json",
        "Idempotency-Key": key,
      },
      body: JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
    });
    let answer = null;
    try {
      answer = await response.json();
    } catch (_) {
      answer = null;
    }
    if (!response.ok) {
      const message = answer && typeof answer.message === "string" ? answer.message : `HTTP ${response.status}`;
      throw new HttpError(response.status, message);
    }
    return answer;
  }

  /** What a decided input answered, for people: accepted, or the first refusal with its rule. */
  function verdictOf(decision) {
    const log = (decision && decision.log) || [];
    const refused = log.find((entry) => entry.verdict === "rejected");
    if (refused) return `refused${refused.rule ? ` (${refused.rule})` : ""}: ${refused.message}`;
    return decision && decision.already_done ? "decided before" : "accepted";
  }

  /** A form whose submit never navigates (the policy lets no form post): `act` sends it. */
  function writeForm(kind, fields, label, act) {
    const status = el("p", { class: "form-status", role: "status" });
    const form = el("form", { class: `write ${kind}`, "data-write": kind }, ...fields, el("button", { type: "submit" }, label), status);
    // One key per request until it is answered: a click again after a lost answer is the
    // same request, decided once; a new one after success or a change of the fields.
    let key = null;
    form.addEventListener("input", () => {
      key = null;
      lastTyped = Date.now();
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const button = form.querySelector("button");
      button.disabled = true;
      status.textContent = "sending…";
      key = key || freshKey();
      try {
        status.textContent = await act(form, key);
        key = null;
        form.dataset.sent = "true";
        form.reset();
        scheduleRefresh();
      } catch (error) {
        status.textContent = error instanceof Error ? error.message : String(error);
      } finally {
        button.disabled = false;
      }
    });
    return form;
  }

  /** "id: text" per line, as criteria; blank lines are skipped. */
  function parseCriteria(text) {
    const criteria = [];
    for (const line of text.split("\n")) {
      if (!line.trim()) continue;
      const at = line.indexOf(":");
      if (at < 0) throw new Error(`"${line.trim()}" is not "id: text"`);
      criteria.push({ id: line.slice(0, at).trim(), text: line.slice(at + 1).trim() });
    }
    return criteria;
  }

  /** The owner corrects an active objective's text and, when given, its criteria (O14, R6). */
  function correctionForm(objective) {
    return writeForm(
      "correct",
      [
        el("h4", null, "Correct this objective"),
        el("label", null, "Correction ", el("textarea", { name: "text", rows: 3, required: "required" })),
        el("label", null, "New criteria, one \"id: text\" per line (empty keeps them) ", el("textarea", { name: "criteria", rows: 3 })),
      ],
      "Send the correction",
      async (form, key) => {
        const text = form.elements.namedItem("text").value;
        const criteria = parseCriteria(form.elements.namedItem("criteria").value);
        const body = { kind: "owner_correction", objective, text };
        if (criteria.length) body.criteria = criteria;
        await send("/events", body, key);
        return "correction posted: the Room decides it next";
      },
    );
  }

  /** A reviewer records a review of the report awaiting review, one verdict per criterion. */
  function reviewForm(objective, reviews) {
    const awaiting = reviews.awaiting_review;
    const rows = (reviews.criteria || []).map((c) =>
      el(
        "fieldset",
        { "data-criterion": c.id },
        el("legend", null, `${c.id}: ${c.text}`),
        el(
          "select",
          { name: `verdict-${c.id}` },
          el("option", { value: "met" }, "met"),
          el("option", { value: "unmet" }, "unmet"),
          el("option", { value: "unknown" }, "unknown"),
        ),
        el("label", null, "Evidence ", el("input", { name: `evidence-${c.id}`, required: "required" })),
        el("label", null, "Source ids (comma separated) ", el("input", { name: `sources-${c.id}` })),
        el("label", null, "Quote ", el("input", { name: `quote-${c.id}` })),
      ),
    );
    return writeForm(
      "review",
      [el("h4", null, `Review report v${awaiting.version}`), ...rows],
      "Record the review",
      async (form, key) => {
        const value = (name) => form.elements.namedItem(name).value;
        const verdicts = (reviews.criteria || []).map((c) => {
          const verdict = {
            criterion: c.id,
            verdict: value(`verdict-${c.id}`),
            evidence: value(`evidence-${c.id}`),
            sources: value(`sources-${c.id}`).split(",").map((s) => s.trim()).filter(Boolean),
          };
          const quote = value(`quote-${c.id}`);
          if (quote.trim()) verdict.quote = quote;
          return verdict;
        });
        const decision = await send(
          `/objectives/${encodeURIComponent(objective)}/reviews`,
          { report_version: awaiting.version, observed: reviews.observed, verdicts },
          key,
        );
        return `review ${verdictOf(decision)}`;
      },
    );
  }

  /**
   * Whether someone is writing in one of the board's forms (a refresh would lose it): a field
   * has the focus, or holds text typed in the last minute. A form left filled and untouched
   * longer than that no longer holds the board still.
   */
  function writing() {
    for (const form of document.querySelectorAll("form.write")) {
      if (form.contains(document.activeElement)) return true;
      const filled = [...form.querySelectorAll("textarea, input")].some((field) => field.value);
      if (filled && Date.now() - lastTyped < 60000) return true;
    }
    return false;
  }

  /** Like get, but a 403 (the caller's role may not read it) is null. */
  async function maybe(path) {
    try {
      return await get(path);
    } catch (error) {
      if (error instanceof HttpError && error.status === 403) return null;
      throw error;
    }
  }

  // --- rendering -----------------------------------------------------------------------------

  function renderBudget(balances) {
    const section = $("budget");
    section.hidden = !balances;
    if (!balances) return;
    const limit = Math.max(Number(balances.limit), 1);
    const uncertain = Number(balances.uncertain);
    const reservedOnly = Math.max(Number(balances.reserved) - uncertain, 0);
    const pct = (micros) => `${Math.min(Math.max((100 * micros) / limit, 0), 100)}%`;
    const gauge = $("gauge");
    gauge.querySelector(".spent").style.width = pct(Number(balances.spent));
    gauge.querySelector(".reserved").style.width = pct(reservedOnly);
    gauge.querySelector(".uncertain").style.width = pct(uncertain);
    gauge.setAttribute(
      "aria-label",
      `spent ${usd(balances.spent)}, reserved ${usd(balances.reserved)} (uncertain ${usd(uncertain)}) of ${usd(balances.limit)}`,
    );
    const figures = $("budget-figures");
    figures.replaceChildren();
    for (const field of ["limit", "spent", "reserved", "uncertain", "available"]) {
      figures.append(
        el("dt", null, field),
        el("dd", { "data-field": field, "data-micros": balances[field] }, `${usd(balances[field])} (${balances[field]} micros)`),
      );
    }
  }

  /** The pool the Room draws on (B8), for members with budget.read: its balances and overrun. */
  function renderPool(budget) {
    const pool = budget && budget.pool;
    const section = $("pool");
    section.hidden = !pool;
    if (!pool) return;
    $("pool-title").textContent = `Pool ${pool.id}`;
    const overrun = $("pool-overrun");
    overrun.hidden = !pool.overrun;
    overrun.textContent = pool.overrun
      ? `admissions stopped by an overrun (${pool.overrun.kind}): the host's administrator raises or acknowledges the pool`
      : "";
    const figures = $("pool-figures");
    figures.replaceChildren();
    for (const field of ["limit", "spent", "reserved", "uncertain", "available"]) {
      const micros = pool.balances[field];
      figures.append(el("dt", null, field), el("dd", { "data-field": field, "data-micros": micros }, `${usd(micros)} (${micros} micros)`));
    }
  }

  function renderBoard(detail) {
    const kanban = el("div", { class: "kanban" });
    const columns = new Map(((detail.board && detail.board.columns) || []).map((c) => [c.column, c.tasks || []]));
    const names = COLUMNS.concat([...columns.keys()].filter((c) => !COLUMNS.includes(c)));
    for (const name of names) {
      const tasks = columns.get(name) || [];
      const column = el("div", { class: "column", "data-column": name }, el("h4", null, name.replace("_", " "), ` (${tasks.length})`));
      for (const task of tasks) {
        column.append(
          el(
            "div",
            { class: "card", "data-task": task.key },
            el("div", { class: "title" }, task.title),
            el("div", { class: "meta" }, `${task.key} · ${task.kind} · ${task.capability} · ${task.assignee}`),
            renderCall(task.call),
          ),
        );
      }
      kanban.append(column);
    }
    const version = detail.board ? `plan version ${detail.board.plan_version}` : "no plan yet";
    return el("div", { class: "board" }, el("h4", null, `Board (${version})`), kanban);
  }

  /** A running call's status, and why it waits or is uncertain (the provider's words). */
  function renderCall(call) {
    if (!call) return null;
    const label = call.status.replaceAll("_", " ");
    return el(
      "div",
      { class: `call call-${call.status}`, "data-call": call.status, "data-op": call.op },
      call.cause ? `${label}: ${call.cause}` : label,
      call.since ? el("span", { class: "muted" }, ` (since ${when(call.since)})`) : null,
    );
  }

  /** Owner messages not answered or made objectives yet, and why one waits. */
  function renderPending(messages) {
    const list = el("ul", { class: "pending" });
    for (const m of messages || []) {
      list.append(
        el(
          "li",
          { "data-event": m.event, "data-held": m.held ? "true" : "false" },
          el("span", { class: "message" }, m.text),
          ` · ${m.attempts} interpretation(s)`,
          renderCall(m.call),
          m.held ? el("div", { class: "held" }, `waits for attention: ${m.held}`) : null,
        ),
      );
    }
    return list.children.length ? el("section", { class: "pending-messages" }, el("h3", null, `Pending messages (${list.children.length})`), list) : null;
  }

  /** The Room's members and their roles, read only (the board has no forms). */
  function renderMembers(page) {
    const section = $("members");
    const items = (page && page.items) || [];
    section.hidden = !items.length;
    $("member-list").replaceChildren(
      ...items.map((m) =>
        el("li", { "data-principal": m.principal }, el("span", { class: "principal" }, m.principal), ` · ${(m.roles || []).join(", ")}`),
      ),
    );
  }

  /** The Room's memory (M1), read only: each entry's text, provenance, author, corrections and
   * retraction. */
  function renderMemory(page) {
    const section = $("memory");
    const items = (page && page.items) || [];
    section.hidden = !items.length;
    $("memory-list").replaceChildren(
      ...items.map((m) => {
        const from = m.provenance || {};
        const source = from.event || from.id || from.url || "";
        const versions = (m.versions || []).length;
        return el(
          "li",
          { "data-entry": m.id, "data-state": m.redacted ? "redacted" : m.retracted ? "retracted" : "current" },
          el("span", { class: "text" }, m.text),
          ` · from ${from.from || "?"} ${source} · added by ${m.added_by}`,
          versions > 1 ? ` · version ${versions}` : null,
          m.retracted ? el("span", { class: "retracted" }, ` · retracted by ${m.retracted.by}: ${m.retracted.why}`) : null,
          m.redacted ? el("span", { class: "redacted" }, ` · redacted by ${m.redacted.by}: ${m.redacted.why}`) : null,
        );
      }),
    );
  }

  /** The Room's redaction records, read only: what was redacted, by whom, when, why, and the
   * digest of what was removed. */
  function renderRedactions(page) {
    const section = $("redactions");
    const items = (page && page.items) || [];
    section.hidden = !items.length;
    $("redaction-list").replaceChildren(
      ...items.map((r) => {
        const target = r.target || {};
        const what = target.kind === "memory" ? `memory entry ${target.entry}` : `content ${target.digest}`;
        return el(
          "li",
          { "data-kind": target.kind || "", "data-old-digest": r.old_digest },
          el("span", { class: "target" }, what),
          ` · redacted by ${r.by} at ${when(r.at)}: `,
          el("span", { class: "why" }, r.why),
          ` · was ${r.old_digest}`,
        );
      }),
    );
  }

  function renderTimeline(decisions) {
    const list = el("ol", { class: "timeline" });
    for (const entry of (decisions && decisions.items) || []) {
      list.append(
        el(
          "li",
          { "data-verdict": entry.verdict, "data-rule": entry.rule || "" },
          el("time", null, when(entry.at)),
          " ",
          el("span", { class: `verdict-${entry.verdict}` }, entry.verdict),
          entry.rule ? " " : null,
          entry.rule ? el("span", { class: "rule" }, entry.rule) : null,
          ` ${entry.input}: `,
          el("span", { class: "message" }, entry.message),
        ),
      );
    }
    if (!list.children.length) list.append(el("li", { class: "muted" }, "no decision in this process yet"));
    return el("div", { class: "decisions" }, el("h4", null, "Decision timeline"), list);
  }

  /** Each source with its title, its address (as text, never a link) and its excerpt. */
  function renderSources(sources) {
    const list = el("ul", { class: "sources" });
    for (const source of sources || []) {
      const item = el(
        "li",
        { class: "source", "data-source": source.id || "", "data-kind": source.kind },
        source.id ? el("code", null, `[${source.id}]`) : null,
        " ",
        el("span", { class: "source-title" }, source.title || source.kind),
        source.uri ? el("span", { class: "source-uri muted" }, ` ${source.uri}`) : null,
      );
      if (source.excerpt) item.append(el("blockquote", { class: "excerpt" }, source.excerpt));
      list.append(item);
    }
    if (!list.children.length) list.append(el("li", { class: "muted" }, "no source"));
    return list;
  }

  function renderReviews(reviews, criteria) {
    const box = el("div", { class: "reviews" }, el("h4", null, "Reports and reviews"));
    if (!reviews) {
      box.append(el("p", { class: "muted" }, "your role may not read reports"));
      return box;
    }
    const textOf = new Map((criteria || []).map((c) => [c.id, c.text]));
    for (const report of reviews.reports || []) {
      const part = el("section", { class: "report", "data-report-version": report.version }, el("h5", null, `Report v${report.version}`));
      if (report.content) {
        part.append(el("p", { class: "muted" }, `by ${report.content.author}`));
        if (report.content.body) {
          part.append(el("div", { class: "report-content report-body" }, report.content.body));
        }
        for (const artifact of report.content.artifacts || []) {
          part.append(el("div", { class: "report-content" }, el("strong", null, artifact.name), "\n", artifact.content));
        }
        part.append(el("h6", null, "Sources"), renderSources(report.content.sources));
      }
      if (report.source_set && report.source_set.digest) {
        part.append(el("p", { class: "muted" }, `source set ${report.source_set.digest}`));
      }
      const done = (reviews.reviews || []).filter((r) => r.report_version === report.version);
      for (const review of done) {
        const table = el(
          "table",
          { class: "verdicts" },
          el("tr", null, el("th", null, "criterion"), el("th", null, "verdict"), el("th", null, "evidence"), el("th", null, "sources"), el("th", null, "quote")),
        );
        for (const v of review.verdicts || []) {
          table.append(
            el(
              "tr",
              { "data-criterion": v.criterion, "data-verdict": v.verdict },
              el("td", null, textOf.get(v.criterion) || v.criterion),
              el("td", { class: `verdict-${v.verdict}` }, v.verdict),
              el("td", null, v.evidence),
              el("td", { class: "verdict-sources" }, (v.sources || []).join(", ")),
              el("td", { class: "verdict-quote" }, v.quote ? el("q", null, v.quote) : ""),
            ),
          );
        }
        part.append(
          el(
            "div",
            { class: "review", "data-reviewer": review.reviewer, "data-outcome": review.outcome },
            el("p", null, `Review by ${review.reviewer}${review.model ? ` (model ${review.model})` : ""}: ${String(review.outcome).replace("_", " ")}`),
            table,
          ),
        );
      }
      if (!done.length) part.append(el("p", { class: "muted" }, "not reviewed yet"));
      box.append(part);
    }
    if (!(reviews.reports || []).length) box.append(el("p", { class: "muted" }, "no report yet"));
    return box;
  }

  /** The owner's corrections (O14), read only: the board posts nothing. */
  function renderCorrections(corrections) {
    const box = el("div", { class: "corrections" }, el("h4", null, "Owner corrections"));
    if (!corrections) {
      box.append(el("p", { class: "muted" }, "your role may not read corrections"));
      return box;
    }
    const list = el("ol", null);
    for (const c of corrections.items || []) {
      const item = el(
        "li",
        { "data-correction": c.event },
        el("p", null, c.text),
        el("p", { class: "muted" }, `by ${c.author} · ${c.plan_version ? `plan v${c.plan_version}` : "no plan yet"}`),
      );
      if (c.criteria) {
        const criteria = el("ul", { class: "criteria" });
        for (const k of c.criteria) criteria.append(el("li", { "data-criterion": k.id }, `${k.id}: ${k.text}`));
        item.append(el("p", { class: "muted" }, "criteria set to:"), criteria);
      } else {
        item.append(el("p", { class: "muted" }, "criteria kept"));
      }
      list.append(item);
    }
    if (list.children.length) box.append(list);
    else box.append(el("p", { class: "muted" }, "no correction"));
    return box;
  }

  async function renderObjective(brief) {
    const path = `/objectives/${encodeURIComponent(brief.id)}`;
    const [detail, decisions, reviews, corrections] = await Promise.all([
      get(path),
      get(`${path}/decisions?limit=200`),
      maybe(`${path}/reviews`),
      maybe(`${path}/corrections`),
    ]);
    const criteria = el("ul", { class: "criteria" });
    for (const c of detail.criteria || []) criteria.append(el("li", { "data-criterion": c.id }, `${c.id}: ${c.text}`));
    return el(
      "article",
      { class: "objective", "data-objective": brief.id, "data-status": detail.status },
      el("h3", null, el("span", { class: "objective-title" }, detail.title), el("span", { class: "status" }, detail.status)),
      el("p", { class: "muted" }, `owner ${detail.owner} · revision ${detail.revision} · ${detail.plan_versions} plan version(s)`),
      criteria,
      renderBoard(detail),
      renderTimeline(decisions),
      renderCorrections(corrections),
      renderReviews(reviews, detail.criteria),
      roles.includes("owner") && !["completed", "canceled"].includes(detail.status) ? correctionForm(brief.id) : null,
      roles.includes("reviewer") && reviews && reviews.awaiting_review ? reviewForm(brief.id, reviews) : null,
    );
  }

  async function refresh() {
    if (!session) return;
    // Someone is writing a correction or a review: refresh once they are done.
    if (writing()) {
      scheduleRefresh(2000);
      return;
    }
    try {
      const room = await get("");
      roles = (room.you && room.you.roles) || [];
      $("whoami").textContent = `${room.you.principal} (${(room.you.roles || []).join(", ") || "no role"})`;
      $("room-title").textContent = `Room ${room.room}`;
      renderBudget(room.budget);
      renderPool(await maybe("/budget?limit=1"));
      renderMembers(await maybe("/members?limit=200"));
      renderMemory(await maybe("/memory?limit=200"));
      renderRedactions(await maybe("/redactions?limit=200"));
      const short = (room.quotes && room.quotes.short) || [];
      const quotes = $("quotes");
      if (quotes) {
        quotes.hidden = !short.length;
        quotes.replaceChildren(...short.map((line) => el("p", { class: "held" }, `quotes: ${line}`)));
      }
      const objectives = await Promise.all((room.objectives || []).map(renderObjective));
      const box = $("objectives");
      const pending = renderPending(room.pending_messages);
      box.replaceChildren(...(pending ? [pending] : []), el("h3", null, `Objectives (${objectives.length})`), ...objectives);
      $("room").hidden = false;
      showError("");
      document.body.dataset.revision = String(room.revision);
      document.body.dataset.loaded = "true";
    } catch (error) {
      if (error instanceof HttpError && error.status === 401) {
        signOut("the token was refused (missing, expired or revoked): sign in again");
        return;
      }
      showError(`could not load the room: ${error.message}`);
    }
  }

  function scheduleRefresh(after) {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refresh, after || 250);
  }

  // --- the live stream -----------------------------------------------------------------------

  function setLive(state) {
    const live = $("live");
    live.dataset.state = state;
    live.textContent = `live: ${state}`;
  }

  function onNotification(data) {
    let parsed = null;
    try {
      parsed = JSON.parse(data);
    } catch (_) {
      return;
    }
    const list = $("notifications");
    list.append(el("li", { "data-notification": parsed.id }, parsed.text));
    scheduleRefresh();
  }

  async function follow(controller) {
    let lastEventId = null;
    while (!controller.signal.aborted) {
      try {
        const headers = { Authorization: `Bearer ${session.token}`, Accept: "text/event-stream" };
        if (lastEventId) headers["Last-Event-ID"] = lastEventId;
        const response = await fetch(`/v1/rooms/${encodeURIComponent(session.room)}/notifications`, {
          headers,
          cache: "no-store",
          credentials: "omit",
          signal: controller.signal,
        });
        if (response.status === 401) {
          signOut("the token was refused (missing, expired or revoked): sign in again");
          return;
        }
        if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
        setLive("connected");
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value.replace(/\r\n?/g, "\n");
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let id = null;
            let kind = "message";
            const data = [];
            for (const line of block.split("\n")) {
              if (line.startsWith(":")) continue;
              const colon = line.indexOf(":");
              const field = colon < 0 ? line : line.slice(0, colon);
              const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
              if (field === "id") id = text;
              else if (field === "event") kind = text;
              else if (field === "data") data.push(text);
            }
            if (id !== null) lastEventId = id;
            if (data.length && kind === "notification") onNotification(data.join("\n"));
          }
        }
      } catch (error) {
        if (controller.signal.aborted) return;
      }
      setLive("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  }

  // --- signing in and out --------------------------------------------------------------------

  function start() {
    $("sign-in").hidden = true;
    $("sign-out").hidden = false;
    $("notifications").replaceChildren();
    if (stream) stream.abort();
    stream = new AbortController();
    follow(stream);
    refresh();
  }

  function signOut(message) {
    sessionStorage.removeItem(TOKEN);
    sessionStorage.removeItem(ROOM);
    session = null;
    if (stream) stream.abort();
    stream = null;
    setLive("off");
    $("room").hidden = true;
    $("sign-out").hidden = true;
    $("sign-in").hidden = false;
    $("whoami").textContent = "";
    showError(message || "");
  }

  function init() {
    // A sign-in link may carry the Room and token in the fragment (never sent to the server):
    // keep them in this tab and take them out of the address bar and history.
    if (location.hash.length > 1) {
      const params = new URLSearchParams(location.hash.slice(1));
      if (params.get("token")) {
        sessionStorage.setItem(TOKEN, params.get("token"));
        sessionStorage.setItem(ROOM, params.get("room") || "local");
      }
      history.replaceState(null, "", location.pathname + location.search);
    }
    $("sign-in-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const token = $("token-input").value.trim();
      const room = $("room-input").value.trim() || "local";
      if (!token) return;
      $("token-input").value = "";
      sessionStorage.setItem(TOKEN, token);
      sessionStorage.setItem(ROOM, room);
      session = { room, token };
      start();
    });
    $("sign-out").addEventListener("click", () => signOut(""));
    const token = sessionStorage.getItem(TOKEN);
    if (token) {
      session = { room: sessionStorage.getItem(ROOM) || "local", token };
      start();
    } else {
      signOut("");
    }
  }

  init();
})();
