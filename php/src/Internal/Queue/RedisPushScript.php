<?php

declare(strict_types=1);

namespace Hearth\Internal\Queue;

/**
 * The Lua script a Redis queue's jobs are pushed with: byte for byte the
 * hearth-queue crate's push script (its src/redis/scripts.rs, NOW then
 * PUSH), so a job pushed from PHP is stored as one pushed by the crate,
 * and both share one script in Redis's cache (one SHA1). The crate's test
 * `the_php_producer_pushes_with_the_crates_script` fails when the two
 * differ: change the crate's script, then copy it here.
 *
 * KEYS ready, delayed, seq, stats. ARGV n, then per job: payload, max,
 * backoff, backoff_max (ms), reply ('' for none), delay_ms. Returns the ids.
 *
 * @internal
 */
final class RedisPushScript
{
    public const TEXT = <<<'LUA'

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

LUA;
}
