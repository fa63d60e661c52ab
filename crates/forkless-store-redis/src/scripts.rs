//! The server-side scripts: each a single atomic step of Redis, so a compare-and-set and
//! everything it writes, or a read and the metadata it is checked against, can never be
//! interleaved with another node's write.
//!
//! `APPLY` is every write. For each session of the call it first checks that the session's
//! bucket's history is vouched for under this boot of Redis (see `VOUCH`; a recovery write
//! names the boot it may write under instead), then the version the write was computed on
//! (`''` for a session that must not exist yet), and only if every check passes applies each
//! session's header, its bucket's session set and due indexes, and its operations. Every key a
//! call names is declared in `KEYS` and, on a cluster, lies in one slot: the committer sends a
//! call per bucket there (`crate::keys`).
//!
//! ```text
//! ARGV: gate ('' | run id), count, filter node ('' = none), filter owner ('' = no lease),
//!       then per session:
//!       rec# st# set# due#*4 run# expected next header sid wake*4 nops op*
//!       (header '': unchanged, keep the stored one; '#': the 1-based index of a key in KEYS)
//! op  : U <stream hex> <row>      put a stream row
//!     | D <stream hex> <key#>     drop a stream row and its events key
//!     | E <key#> <last> <member>  add a chunk of events (member: first seq ++ chunk)
//!     | T <key#> <low>            drop the chunks whose events all lie below low
//!     | X <key#>                  drop an events key
//!     | P <key#> <channel> <msg>  publish a hint; with a filter, only if a node other than the
//!                                 writer owns the session (with a lease, or nobody does) or
//!                                 declared interest in it (key#: its interest set)
//!     | O <key#> <node>           make node the owner (and add the session to its owner set)
//! returns {1, h} applied, h hints published | {0, i} session i moved or exists | {-1, i} unknown
//!       | {-3, i} session i's bucket is not vouched for under this boot: nothing written
//! ```
//!
//! It owns the Lua, not the encoding of what it stores.

/// Every write.
pub(crate) const APPLY: &str = r#"
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
local gate = ARGV[1]
local n = tonumber(ARGV[2])
local fnode, fowner = ARGV[3], ARGV[4]
local function wanted(rec, interest)
  local o = redis.call('HGET', rec, 'o')
  if fowner == '' then
    if o then return true end
  elseif o ~= fowner then
    return true
  end
  local tailing = redis.call('SCARD', interest)
  return tailing > 1 or (tailing == 1 and redis.call('SISMEMBER', interest, fnode) == 0)
end
local sent = 0
local blocks = {}
local i = 5
for s = 1, n do
  blocks[s] = i
  if gate == '' then
    if redis.call('GET', KEYS[tonumber(ARGV[i + 7])]) ~= run then return {-3, s} end
  elseif gate ~= run then
    return {-3, s}
  end
  local v = redis.call('HGET', KEYS[tonumber(ARGV[i])], 'v')
  local expected = ARGV[i + 8]
  if expected == '' then
    if v then return {0, s} end
  elseif not v then
    return {-1, s}
  elseif v ~= expected then
    return {0, s}
  end
  i = i + 17 + tonumber(ARGV[i + 16])
end
for s = 1, n do
  local i = blocks[s]
  local rec, st, sid = KEYS[tonumber(ARGV[i])], KEYS[tonumber(ARGV[i + 1])], ARGV[i + 11]
  if ARGV[i + 10] == '' then
    redis.call('HSET', rec, 'v', ARGV[i + 9])
  else
    redis.call('HSET', rec, 'v', ARGV[i + 9], 'h', ARGV[i + 10])
  end
  redis.call('SADD', KEYS[tonumber(ARGV[i + 2])], sid)
  for w = 1, 4 do
    local at, due = ARGV[i + 11 + w], KEYS[tonumber(ARGV[i + 2 + w])]
    if at == '' then redis.call('ZREM', due, sid) else redis.call('ZADD', due, at, sid) end
  end
  local j, last = i + 17, i + 16 + tonumber(ARGV[i + 16])
  while j <= last do
    local op = ARGV[j]
    if op == 'U' then redis.call('HSET', st, ARGV[j + 1], ARGV[j + 2]); j = j + 3
    elseif op == 'D' then redis.call('HDEL', st, ARGV[j + 1]); redis.call('DEL', KEYS[tonumber(ARGV[j + 2])]); j = j + 3
    elseif op == 'E' then redis.call('ZADD', KEYS[tonumber(ARGV[j + 1])], ARGV[j + 2], ARGV[j + 3]); j = j + 4
    elseif op == 'T' then redis.call('ZREMRANGEBYSCORE', KEYS[tonumber(ARGV[j + 1])], '-inf', '(' .. ARGV[j + 2]); j = j + 3
    elseif op == 'X' then redis.call('DEL', KEYS[tonumber(ARGV[j + 1])]); j = j + 2
    elseif op == 'P' then
      if fnode == '' or wanted(rec, KEYS[tonumber(ARGV[j + 1])]) then
        redis.call('PUBLISH', ARGV[j + 2], ARGV[j + 3]); sent = sent + 1
      end
      j = j + 4
    elseif op == 'O' then redis.call('HSET', rec, 'o', ARGV[j + 2]); redis.call('SADD', KEYS[tonumber(ARGV[j + 1])], sid); j = j + 3
    else return redis.error_reply('forkless: unknown op ' .. op) end
  end
end
return {1, sent}
"#;

/// A record and every stream row of it, at one instant, with the boot its bucket's history
/// is vouched under (its run key, `''` if none): `{version, run, header, {rows}}`, or
/// `{version, run}` alone when the record is still at version `ARGV[1]` and the run key
/// starts with `ARGV[2]` (a node's cached record is current: a version is numbered again
/// only after a restart that lost a suffix, which vouches the bucket under a new boot), or
/// `false` when unknown. KEYS: rec, st, the bucket's run key; ARGV: known version and tag
/// (`''` when none).
pub(crate) const LOAD: &str = r#"
local vh = redis.call('HMGET', KEYS[1], 'v', 'h')
if not vh[1] then return false end
local run = redis.call('GET', KEYS[3]) or ''
if ARGV[1] ~= '' and vh[1] == ARGV[1] and run ~= '' and string.sub(run, 1, 16) == ARGV[2] then
  return {vh[1], run}
end
return {vh[1], run, vh[2], redis.call('HVALS', KEYS[2])}
"#;

/// A stream's row and the chunks holding its events after a cursor up to a bound, at one
/// instant: `{1, row, members}`, `{-2}` (unknown stream) or `{-1}` (unknown session). Chunks
/// are scored by their last event: those ending after the cursor up to the bound, and the one
/// ending past the bound, which may start within it. KEYS: rec, st, events; ARGV: stream hex,
/// after, bound.
pub(crate) const READ: &str = r#"
local row = redis.call('HGET', KEYS[2], ARGV[1])
if not row then
  if redis.call('EXISTS', KEYS[1]) == 1 then return {-2} end
  return {-1}
end
local chunks = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. ARGV[2], ARGV[3])
local more = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. ARGV[3], '+inf', 'LIMIT', 0, 1)
if more[1] then chunks[#chunks + 1] = more[1] end
return {1, row, chunks}
"#;

/// Check the layout this store's data was written in: `{1}` it is `ARGV[1]` (or nothing was
/// stamped and it is now), `{0, layout}` another layout. KEYS: the layout key.
pub(crate) const LAYOUT: &str = r#"
local found = redis.call('GET', KEYS[1])
if found == ARGV[1] then return {1} end
if found then return {0, found} end
redis.call('SET', KEYS[1], ARGV[1])
return {1}
"#;

/// Forget a session: its keys, its place in its bucket's session and owner sets and due
/// indexes; publish the hint. KEYS: rec, st, sessions, due*4, interest; ARGV: sid, events key
/// base, channel, hint ('' = none), owner set base (all of the session's bucket).
pub(crate) const REMOVE: &str = r#"
for _, stream in ipairs(redis.call('HKEYS', KEYS[2])) do redis.call('DEL', ARGV[2] .. stream) end
local owner = redis.call('HGET', KEYS[1], 'o')
if owner then redis.call('SREM', ARGV[5] .. owner, ARGV[1]) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[8])
redis.call('SREM', KEYS[3], ARGV[1])
for w = 4, 7 do redis.call('ZREM', KEYS[w], ARGV[1]) end
if ARGV[4] ~= '' then redis.call('PUBLISH', ARGV[3], ARGV[4]) end
return 1
"#;

/// Declare that node `ARGV[1]` tails a session, unless `ARGV[2]` (the node's id, `''` without
/// a lease) owns it: `1` declared, `2` it owns the session (nothing written), `0` the session
/// is unknown. A script runs between two others, never within one: an `APPLY` of the session
/// ran wholly before it (a read after it sees that write) or wholly after (and sees the
/// interest). KEYS: rec, interest.
pub(crate) const DECLARE: &str = r#"
local o = redis.call('HGET', KEYS[1], 'o')
if not o and redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[2] ~= '' and o == ARGV[2] then return 2 end
redis.call('SADD', KEYS[2], ARGV[1])
return 1
"#;

/// Whether a bucket's history is vouched for under this boot of Redis (its `run_id`, new at
/// every start; on a cluster, the boot of the primary holding the bucket's slot): `{0}` it is;
/// `{1}` it is now (an empty bucket, or `ARGV[1]` is `trust`: Redis syncs every write, so a
/// restart kept everything); `{2, run}` it cannot be, and every session of the bucket must end
/// before [`CONFIRM`] vouches for the boot `run`. Vouching a boot also says from when the
/// bucket's spent one-time keys are known (`ARGV[2]`, now): kept if Redis is trusted, else from
/// now on (keys spent before may be lost). KEYS: the bucket's run key, session set and
/// spent-since.
pub(crate) const VOUCH: &str = r#"
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
local vouched = redis.call('GET', KEYS[1])
if vouched == run then return {0} end
if ARGV[1] == 'trust' then
  redis.call('SET', KEYS[1], run)
  redis.call('SET', KEYS[3], ARGV[2], 'NX')
  return {1}
end
if not vouched and redis.call('SCARD', KEYS[2]) == 0 then
  redis.call('SET', KEYS[1], run)
  redis.call('SET', KEYS[3], ARGV[2])
  return {1}
end
return {2, run}
"#;

/// Vouch for boot `ARGV[1]` once every session of the bucket has ended: `1`, or `0` if Redis
/// restarted again meanwhile; its spent one-time keys are known from `ARGV[2]` (now) on.
/// KEYS: the bucket's run key and spent-since.
pub(crate) const CONFIRM: &str = r#"
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
if run ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], run)
redis.call('SET', KEYS[2], ARGV[2])
return 1
"#;

/// Spend one-time key `KEYS[3]` issued at `ARGV[1]`, kept until `ARGV[2]` (milliseconds):
/// `1` spent now, `0` spent before, `2` issued before the spent keys are known from, `-3`
/// this boot of Redis is not vouched for. `ARGV[3]` is now, the start of what is known if
/// nothing says otherwise. KEYS: the key's bucket's run key and spent-since, the key.
pub(crate) const SPEND: &str = r#"
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
if redis.call('GET', KEYS[1]) ~= run then return -3 end
local since = redis.call('GET', KEYS[2])
if not since then
  redis.call('SET', KEYS[2], ARGV[3])
  since = ARGV[3]
end
if tonumber(ARGV[1]) < tonumber(since) then return 2 end
if redis.call('SET', KEYS[3], '1', 'NX', 'PXAT', ARGV[2]) then return 1 end
return 0
"#;

/// Renew (`ARGV[2]` milliseconds, if at least `ARGV[3]` milliseconds are left) or, with no
/// `ARGV[2]`, release a node lease if `ARGV[1]` still holds it: `1` or `0`. KEYS: the lease
/// key.
pub(crate) const LEASE: &str = r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if not ARGV[2] then
  redis.call('DEL', KEYS[1])
  return 1
end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"#;

/// Make `ARGV[3]` the owner of session `ARGV[1]` if `ARGV[2]` still owns it: `1` or `0`.
/// KEYS: rec, the old owner's set, the new owner's set (of the session's bucket).
pub(crate) const CLAIM: &str = r#"
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'o', ARGV[3])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
return 1
"#;

/// Read task `KEYS[2]`: `{1, v, r}`, `{0}` if unknown, `{-3}` if this boot of Redis is not
/// vouched for in its bucket. KEYS: the bucket's run key, the task.
pub(crate) const LOAD_TASK: &str = r#"
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
if redis.call('GET', KEYS[1]) ~= run then return {-3} end
local t = redis.call('HMGET', KEYS[2], 'v', 'r')
if not t[1] then return {0} end
return {1, tonumber(t[1]), t[2]}
"#;

/// Insert task `KEYS[2]` (`ARGV[1]` empty) or replace it at version `ARGV[1]`, with record
/// `ARGV[2]`, node `ARGV[3]` (empty: none), open `ARGV[4]` (`1`/`0`), expiry `ARGV[5]`
/// (milliseconds), its hex id `ARGV[6]`: `1` stored, `0` taken or moved, `-3` this boot of
/// Redis is not vouched for. KEYS: the bucket's run key, the task, the bucket's open tasks and
/// its expiry index.
pub(crate) const PUT_TASK: &str = r#"
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
if redis.call('GET', KEYS[1]) ~= run then return -3 end
local v = redis.call('HGET', KEYS[2], 'v')
if ARGV[1] == '' then
  if v then return 0 end
  v = 0
elseif v ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[2], 'v', tonumber(v) + 1, 'r', ARGV[2])
if ARGV[4] == '1' then redis.call('HSET', KEYS[3], ARGV[6], ARGV[3]) else redis.call('HDEL', KEYS[3], ARGV[6]) end
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[6])
return 1
"#;

/// Delete task `KEYS[1]` (hex id `ARGV[1]`) if its expiry is before `ARGV[2]`: `1` or `0`.
/// KEYS: the task, the bucket's open tasks and its expiry index.
pub(crate) const DROP_TASK: &str = r#"
local at = redis.call('ZSCORE', KEYS[3], ARGV[1])
if not at or tonumber(at) >= tonumber(ARGV[2]) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return 1
"#;
