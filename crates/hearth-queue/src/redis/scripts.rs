//! The Lua scripts of the Redis engine: each change of a job's place is
//! one script, so it is atomic however many keys it touches. All keys of a
//! queue share the hash tag `{NAME}`, so they live in one cluster slot.
//!
//! Keys (prefix `hearth:{NAME}:`): `ready` (the stream, consumer group
//! `hearth`), `delayed` (sorted set by due time in ms, members are
//! msgpack'd field lists), `dead` (the dead-letter stream), `deadix` (hash:
//! job id to its `dead` entry), `stats` (hash of counters), `seq` (job ids),
//! `result:CHANNEL` (a results stream, trimmed and expiring). Consumers of
//! the group that hold nothing and were idle for an hour are removed.
//!
//! A `ready` entry's fields: `id`, `payload`, `attempts` (attempts made
//! before this entry), `max`, `backoff` and `backoff_max` (ms), `at`
//! (pushed, ms), and optionally `reply` and `error` (the last attempt's).
//! The attempt a delivery is = `attempts` + the entry's delivery count.

use redis::Script;

/// Redis's clock in ms: one clock for every host.
const NOW: &str = r"
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function last_delivered(key, group)
  if redis.call('EXISTS', key) == 0 then return nil end
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
    local name, last
    for i = 1, #g, 2 do
      if g[i] == 'name' then name = g[i + 1] elseif g[i] == 'last-delivered-id' then last = g[i + 1] end
    end
    if name == group then return last end
  end
  return nil
end
";

/// KEYS ready, delayed, seq, stats. ARGV n, then per job: payload, max,
/// backoff, backoff_max, reply ('' for none), delay_ms. Returns the ids.
const PUSH: &str = r"
local now = now_ms()
local n = tonumber(ARGV[1])
local ids = {}
for i = 0, n - 1 do
  local b = 2 + i * 6
  local id = redis.call('INCR', KEYS[3])
  local f = {'id', tostring(id), 'payload', ARGV[b], 'attempts', '0', 'max', ARGV[b + 1],
             'backoff', ARGV[b + 2], 'backoff_max', ARGV[b + 3], 'at', tostring(now)}
  if ARGV[b + 4] ~= '' then f[#f + 1] = 'reply'; f[#f + 1] = ARGV[b + 4] end
  local delay = tonumber(ARGV[b + 5])
  if delay > 0 then
    redis.call('ZADD', KEYS[2], now + delay, cmsgpack.pack(f))
  else
    redis.call('XADD', KEYS[1], '*', unpack(f))
  end
  ids[#ids + 1] = id
end
redis.call('HINCRBY', KEYS[4], 'pushed', n)
return ids
";

/// Moves due delayed jobs to the stream, then claims holds idle longer
/// than the visibility timeout (counted as retried). KEYS ready, delayed,
/// stats. ARGV group, consumer,
/// min_idle_ms, count, promote_limit. Returns {{{entry id, fields,
/// deliveries}...}, ms until the next delayed job is due or -1}.
const CLAIM: &str = r"
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))
for _, m in ipairs(due) do
  local ok, f = pcall(cmsgpack.unpack, m)
  local good = ok and type(f) == 'table' and #f > 0 and #f % 2 == 0
  if good then
    for _, v in ipairs(f) do
      if type(v) ~= 'string' and type(v) ~= 'number' then good = false end
    end
  end
  if good then
    redis.call('XADD', KEYS[1], '*', unpack(f))
  else
    redis.call('XADD', KEYS[1], '*', 'malformed', m)
  end
  redis.call('ZREM', KEYS[2], m)
end
local out = {}
local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], '0-0', 'COUNT', ARGV[4])
for _, e in ipairs(r[2]) do
  if type(e) == 'table' and e[2] then
    local p = redis.call('XPENDING', KEYS[1], ARGV[1], e[1], e[1], 1)
    local n = 1
    if #p > 0 then n = p[1][4] end
    out[#out + 1] = {e[1], e[2], n}
    redis.call('HINCRBY', KEYS[3], 'retried', 1)
  elseif type(e) == 'table' then
    redis.call('XACK', KEYS[1], ARGV[1], e[1])
  end
end
local wait = -1
local nxt = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #nxt > 0 then wait = math.max(0, tonumber(nxt[2]) - now) end
return {out, wait}
";

/// KEYS ready, stats, reply (ready again when none). ARGV group, entry,
/// reply?, id, attempt, result, maxlen, ttl_s. Returns 1, or 0 when the
/// entry was no longer pending (someone finished it first).
const ACK: &str = r"
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('HINCRBY', KEYS[2], 'done', 1)
if ARGV[3] == '1' then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*',
             'id', ARGV[4], 'attempt', ARGV[5], 'status', 'done', 'result', ARGV[6])
  redis.call('EXPIRE', KEYS[3], ARGV[8])
end
return 1
";

/// Ends a hold the caller has: back to the queue for another attempt, or
/// to the dead-letter store. KEYS ready, delayed, dead, deadix, stats, seq,
/// reply. ARGV group, entry, consumer, mode ('retry', 'dead' or
/// 'malformed'), delay_ms, reason, error, max_dead, reply?, reply_maxlen,
/// reply_ttl_s, job id ('' to take a new one), attempt, count_failed, then
/// the job's fields. Returns 1, or 0 when the caller no longer holds it.
const SETTLE: &str = r"
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] then return 0 end
local fields = {}
for i = 16, #ARGV do fields[#fields + 1] = ARGV[i] end
local raw = nil
if ARGV[4] == 'malformed' then
  local e = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
  raw = ''
  if #e > 0 and e[1][2] then raw = cmsgpack.pack(e[1][2]) end
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
if ARGV[14] == '1' then redis.call('HINCRBY', KEYS[5], 'failed', 1) end
local now = now_ms()
if ARGV[4] == 'retry' then
  local delay = tonumber(ARGV[5])
  if delay > 0 then
    redis.call('ZADD', KEYS[2], now + delay, cmsgpack.pack(fields))
  else
    redis.call('XADD', KEYS[1], '*', unpack(fields))
  end
  redis.call('HINCRBY', KEYS[5], 'retried', 1)
  return 1
end
local id = ARGV[12]
if id == '' then id = tostring(redis.call('INCR', KEYS[6])) end
local d
if raw then d = {'id', id, 'raw', raw} else d = fields end
d[#d + 1] = 'reason'; d[#d + 1] = ARGV[6]
d[#d + 1] = 'error'; d[#d + 1] = ARGV[7]
d[#d + 1] = 'dead_at'; d[#d + 1] = tostring(now)
local did = redis.call('XADD', KEYS[3], '*', unpack(d))
redis.call('HSET', KEYS[4], id, did)
redis.call('HINCRBY', KEYS[5], 'died', 1)
local over = redis.call('XLEN', KEYS[3]) - tonumber(ARGV[8])
if over > 0 then
  for _, e in ipairs(redis.call('XRANGE', KEYS[3], '-', '+', 'COUNT', over)) do
    local f = e[2]
    for i = 1, #f, 2 do
      if f[i] == 'id' then redis.call('HDEL', KEYS[4], f[i + 1]); break end
    end
    redis.call('XDEL', KEYS[3], e[1])
  end
end
if ARGV[9] == '1' then
  local r = {'id', id, 'attempt', ARGV[13], 'status', 'dead', 'reason', ARGV[6], 'error', ARGV[7]}
  if ARGV[15] ~= '' then r[#r + 1] = 'result'; r[#r + 1] = ARGV[15] end
  redis.call('XADD', KEYS[7], 'MAXLEN', '~', ARGV[10], '*', unpack(r))
  redis.call('EXPIRE', KEYS[7], ARGV[11])
end
return 1
";

/// Renews a hold the caller has. KEYS ready. ARGV group, entry, consumer.
const EXTEND: &str = r"
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'JUSTID')
return 1
";

/// KEYS ready, delayed, dead, stats. ARGV group. Returns {ready, reserved,
/// delayed, dead, {counters}, oldest ready entry id or '', now_ms}.
const STATS: &str = r"
local ready, reserved, oldest = 0, 0, ''
local last = last_delivered(KEYS[1], ARGV[1])
if last then
  reserved = redis.call('XPENDING', KEYS[1], ARGV[1])[1]
  ready = redis.call('XLEN', KEYS[1]) - reserved
  local first = redis.call('XRANGE', KEYS[1], '(' .. last, '+', 'COUNT', 1)
  if #first > 0 then oldest = first[1][1] end
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  ready = redis.call('XLEN', KEYS[1])
end
return {ready, reserved, redis.call('ZCARD', KEYS[2]), redis.call('XLEN', KEYS[3]),
        redis.call('HGETALL', KEYS[4]), oldest, now_ms()}
";

/// KEYS ready. ARGV group, count. The ready entries, oldest first.
const PEEK_READY: &str = r"
local last = last_delivered(KEYS[1], ARGV[1])
if not last then return {} end
return redis.call('XRANGE', KEYS[1], '(' .. last, '+', 'COUNT', ARGV[2])
";

/// KEYS ready, delayed, dead, deadix. ARGV part, group, limit. Returns how
/// many were removed (for `ready`, at most `limit` per call).
const PURGE: &str = r"
if ARGV[1] == 'ready' then
  local last = last_delivered(KEYS[1], ARGV[2])
  if not last then return 0 end
  local es = redis.call('XRANGE', KEYS[1], '(' .. last, '+', 'COUNT', ARGV[3])
  for _, e in ipairs(es) do redis.call('XDEL', KEYS[1], e[1]) end
  return #es
elseif ARGV[1] == 'delayed' then
  local n = redis.call('ZCARD', KEYS[2])
  redis.call('DEL', KEYS[2])
  return n
else
  local n = redis.call('XLEN', KEYS[3])
  redis.call('DEL', KEYS[3], KEYS[4])
  return n
end
";

/// Dead jobs back to the stream with their attempts reset. KEYS ready,
/// dead, deadix. ARGV 'one' and a job id, or 'upto', the last dead entry
/// id to take and a limit. Returns how many went back.
const RETRY_DEAD: &str = r"
local entries
if ARGV[1] == 'one' then
  local did = redis.call('HGET', KEYS[3], ARGV[2])
  if not did then return 0 end
  entries = redis.call('XRANGE', KEYS[2], did, did)
else
  entries = redis.call('XRANGE', KEYS[2], '-', ARGV[2], 'COUNT', ARGV[3])
end
for _, e in ipairs(entries) do
  local f = e[2]
  local out, raw, id = {}, nil, nil
  for i = 1, #f, 2 do
    local k, v = f[i], f[i + 1]
    if k == 'raw' then raw = v
    elseif k == 'reason' or k == 'dead_at' then
    elseif k == 'attempts' then out[#out + 1] = k; out[#out + 1] = '0'
    else
      if k == 'id' then id = v end
      out[#out + 1] = k; out[#out + 1] = v
    end
  end
  if raw then
    local ok, r = pcall(cmsgpack.unpack, raw)
    if ok and type(r) == 'table' and #r > 0 then out = r else out = {'malformed', raw} end
  end
  redis.call('XADD', KEYS[1], '*', unpack(out))
  redis.call('XDEL', KEYS[2], e[1])
  if id then redis.call('HDEL', KEYS[3], id) end
end
return #entries
";

/// Removes dead job `id` for good: its `dead` entry and its `deadix`
/// field, the only places a dead job is (a ready, delayed or held job has
/// no `deadix` field, so it is never found here). KEYS dead, deadix. ARGV
/// job id. Returns 1 when an entry was removed, else 0 (an index field
/// left pointing at no entry is dropped all the same).
const DELETE_DEAD: &str = r"
local did = redis.call('HGET', KEYS[2], ARGV[1])
if not did then return 0 end
local n = redis.call('XDEL', KEYS[1], did)
redis.call('HDEL', KEYS[2], ARGV[1])
return n
";

/// Forgets consumers that hold nothing and were last seen long ago, so a
/// group's list of consumers stays bounded however many come and go.
/// KEYS ready. ARGV group, idle_ms. Returns how many were removed.
const FORGET: &str = r"
if not last_delivered(KEYS[1], ARGV[1]) then return 0 end
local n = 0
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local name, pending, idle
  for i = 1, #c, 2 do
    if c[i] == 'name' then name = c[i + 1]
    elseif c[i] == 'pending' then pending = c[i + 1]
    elseif c[i] == 'idle' then idle = c[i + 1] end
  end
  if name and pending == 0 and idle and idle > tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], name)
    n = n + 1
  end
end
return n
";

/// The engine's scripts, hashed once per queue handle.
#[derive(Debug)]
pub(crate) struct Scripts {
    pub push: Script,
    pub claim: Script,
    pub ack: Script,
    pub settle: Script,
    pub extend: Script,
    pub stats: Script,
    pub peek_ready: Script,
    pub purge: Script,
    pub retry_dead: Script,
    pub delete_dead: Script,
    pub forget: Script,
}

impl Scripts {
    pub fn new() -> Self {
        let s = |body: &str| Script::new(&format!("{NOW}{body}"));
        Scripts {
            push: s(PUSH),
            claim: s(CLAIM),
            ack: s(ACK),
            settle: s(SETTLE),
            extend: s(EXTEND),
            stats: s(STATS),
            peek_ready: s(PEEK_READY),
            purge: s(PURGE),
            retry_dead: s(RETRY_DEAD),
            delete_dead: s(DELETE_DEAD),
            forget: s(FORGET),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The PHP producer (`Hearth\Queue`, php/src) pushes with a copy of
    /// the push script, kept in a nowdoc: it must be this script byte for
    /// byte, so a job it pushes is stored as one pushed here, and both use
    /// one script (one SHA1) in Redis's cache.
    #[test]
    fn the_php_producer_pushes_with_the_crates_script() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../php/src/Internal/Queue/RedisPushScript.php"
        );
        let php = std::fs::read_to_string(path).expect("read the PHP copy of the push script");
        let copy = php
            .split_once("<<<'LUA'\n")
            .and_then(|(_, rest)| rest.split_once("\nLUA;"))
            .map(|(text, _)| text)
            .expect("a nowdoc <<<'LUA' ... LUA; in RedisPushScript.php");
        let ours = format!("{NOW}{PUSH}");
        assert!(
            copy == ours,
            "{path} differs from the crate's push script (NOW then PUSH): copy it again"
        );
        assert_eq!(Script::new(copy).get_hash(), Scripts::new().push.get_hash());
    }
}
