-- Reverts 0008: drops every budget pool and its log. Rooms whose state names a pool then
-- admit no reservation until they are detached (B8: a pool that cannot be read holds
-- nothing).
DROP TABLE pool_ledger;
DROP TABLE budget_pools;
