package redisstream

import "github.com/redis/go-redis/v9"

// claimScript claims up to ARGV[3] entries for consumer ARGV[2] of group
// ARGV[1] on stream KEYS[1], atomically: first entries of dead consumers
// (XAUTOCLAIM with min idle time ARGV[4] ms, which counts a delivery),
// then new entries (XREADGROUP >). An entry whose delivery count exceeds
// ARGV[5] (0: no limit) is not returned for the claimer to run but listed
// apart, so that the engine reports it dead (it learns of it from nothing
// else). It stays pending under the claimer, its idle time reset by the
// XAUTOCLAIM, so the claim's lease holds it like its other entries: the
// claim's Commit buries it (buryScript) once the engine recorded it dead,
// and an entry whose claim is aborted or lost comes back for a later
// claim to list dead again. Burying it here would lose it to the log
// when the engine's record never comes. It returns {{dead entry}...,
// {entry}...}, each entry {id, deliveries, {field, value, ...}}, and 1
// when its XAUTOCLAIM rounds ran out before the end of the pending list
// after finding dead entries (0 otherwise): a claim of only dead entries
// is then not the end of the stream (cursor.Claim.More).
var claimScript = redis.NewScript(`
local stream = KEYS[1]
local group, consumer = ARGV[1], ARGV[2]
local max = tonumber(ARGV[3])
local minidle = ARGV[4]
local maxatt = tonumber(ARGV[5])
local out, n, dead = {}, 0, {}
local cursor = '0-0'
for round = 1, 100 do
  if n >= max then break end
  local r = redis.call('XAUTOCLAIM', stream, group, consumer, minidle, cursor, 'COUNT', max - n)
  cursor = r[1]
  for _, e in ipairs(r[2]) do
    if type(e) == 'table' and type(e[2]) == 'table' then
      local id, fields = e[1], e[2]
      local p = redis.call('XPENDING', stream, group, id, id, 1)
      local count = 1
      if p[1] then count = tonumber(p[1][4]) end
      if maxatt > 0 and count > maxatt then
        dead[#dead + 1] = {id, count, fields}
      else
        n = n + 1
        out[n] = {id, count, fields}
      end
    end
  end
  if cursor == '0-0' then break end
end
if n < max then
  local r = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', max - n, 'STREAMS', stream, '>')
  if r and r[1] then
    for _, e in ipairs(r[1][2]) do
      n = n + 1
      out[n] = {e[1], 1, e[2]}
    end
  end
end
-- more: the rounds ran out with overdue entries possibly left unseen,
-- having found dead ones, which the claim's Commit takes off the pending
-- list. Rounds that found none make no progress a next claim could build
-- on (it scans from the head again): saying more then would have the
-- engine claim for ever while other consumers hold a long pending list.
local more = 0
if cursor ~= '0-0' and #dead > 0 then more = 1 end
return {dead, out, more}
`)

// ackScript acknowledges entries of group ARGV[1] on stream KEYS[1] whose
// delivery count still equals the one their lease token carries (pairs
// of id, count from ARGV[3]); with ARGV[2] == "1" it also deletes them.
// It forgets their last error (field id of the hash KEYS[2], see
// releaseScript). It returns the ids it refused: not pending any more,
// or redelivered since.
var ackScript = redis.NewScript(`
local stream, errs, group, del = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local stale = {}
for i = 3, #ARGV, 2 do
  local id, count = ARGV[i], ARGV[i + 1]
  local p = redis.call('XPENDING', stream, group, id, id, 1)
  if p[1] and tostring(p[1][4]) == count then
    redis.call('XACK', stream, group, id)
    if del == '1' then redis.call('XDEL', stream, id) end
    redis.call('HDEL', errs, id)
  else
    stale[#stale + 1] = id
  end
end
return stale
`)

// releaseScript hands entries back: each pending entry of group ARGV[1]
// on stream KEYS[1] whose delivery count equals its token's (triples of
// id, count, error from ARGV[3]) gets an idle time of ARGV[2] ms, at
// least the lease, so the next claim reclaims it at once. XCLAIM JUSTID
// keeps the delivery count: the reclaim counts the next delivery. A
// non-empty error is kept as the entry's last error in the hash KEYS[2]
// (field: the entry id) until the entry is acknowledged or buried, which
// copies it to the dead-letter entry; an empty one keeps an earlier error.
// It returns the ids it refused.
var releaseScript = redis.NewScript(`
local stream, errs, group, idle = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local stale = {}
for i = 3, #ARGV, 3 do
  local id, count, err = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local p = redis.call('XPENDING', stream, group, id, id, 1)
  if p[1] and tostring(p[1][4]) == count then
    redis.call('XCLAIM', stream, group, p[1][2], 0, id, 'IDLE', idle, 'JUSTID')
    if err ~= '' then redis.call('HSET', errs, id, err) end
  else
    stale[#stale + 1] = id
  end
end
return stale
`)

// unclaimDeadScript hands back the entries past max_attempts that an
// aborted claim held to bury (claimScript): each pending entry of group
// ARGV[1] on stream KEYS[1] whose delivery count equals its token's
// (pairs of id, count from ARGV[3]) gets an idle time of ARGV[2] ms, at
// least the lease, so the next claim reclaims it at once, and the
// delivery count it had before the aborted claim took it (RETRYCOUNT
// count - 1), so that the reclaim lists it dead with the same count: the
// aborted listing is undone, not counted as a delivery. It returns the ids
// it refused: not pending any more, or claimed again since.
var unclaimDeadScript = redis.NewScript(`
local stream, group, idle = KEYS[1], ARGV[1], ARGV[2]
local stale = {}
for i = 3, #ARGV, 2 do
  local id, count = ARGV[i], ARGV[i + 1]
  local p = redis.call('XPENDING', stream, group, id, id, 1)
  if p[1] and tostring(p[1][4]) == count then
    redis.call('XCLAIM', stream, group, p[1][2], 0, id, 'IDLE', idle, 'RETRYCOUNT', tonumber(count) - 1, 'JUSTID')
  else
    stale[#stale + 1] = id
  end
end
return stale
`)

// buryScript copies pending entries of group ARGV[1] on stream KEYS[1]
// (pairs of id, count from ARGV[4]) to the dead-letter stream KEYS[2],
// with reason ARGV[2] and their last error (the hash KEYS[3], see
// releaseScript) if they have one, and acknowledges them, deleting them
// from KEYS[1] too when ARGV[3] is "1" (delete_acked). A non-empty
// count fences: the entry is moved only if its delivery count still
// equals it, that is if the claim that listed it dead still holds it (one
// whose lease ran out and whose entry another claim took over leaves it
// to that claim, which lists it dead too); an empty count (the engine's
// DeadLetter request) moves any pending entry. Entries no longer in the
// stream are dead-lettered with their id only. It returns {moved,
// {refused id}...}.
var buryScript = redis.NewScript(`
local stream, dead, errs, group, reason, del = KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3]
local moved, stale = 0, {}
for i = 4, #ARGV, 2 do
  local id, want = ARGV[i], ARGV[i + 1]
  local p = redis.call('XPENDING', stream, group, id, id, 1)
  if p[1] and (want == '' or tostring(p[1][4]) == want) then
    local args = {dead, '*'}
    local e = redis.call('XRANGE', stream, id, id)
    if e[1] then
      for _, v in ipairs(e[1][2]) do args[#args + 1] = v end
    end
    for _, kv in ipairs({{'cursorflow_id', id}, {'cursorflow_stream', stream}, {'cursorflow_group', group},
        {'cursorflow_deliveries', tostring(p[1][4])}, {'cursorflow_reason', reason}}) do
      args[#args + 1] = kv[1]
      args[#args + 1] = kv[2]
    end
    local lasterr = redis.call('HGET', errs, id)
    if lasterr then
      args[#args + 1] = 'cursorflow_last_error'
      args[#args + 1] = lasterr
    end
    redis.call('XADD', unpack(args))
    redis.call('XACK', stream, group, id)
    if del == '1' then redis.call('XDEL', stream, id) end
    redis.call('HDEL', errs, id)
    moved = moved + 1
  elseif want ~= '' then
    stale[#stale + 1] = id
  end
end
return {moved, stale}
`)
