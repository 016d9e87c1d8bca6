-- now.lua: the time of a check, read by every lean single-limit script right after the
-- helpers it uses (script.rs assembles them): ARGV[1] is now_us, or -1 to read Redis TIME.

local now = tonumber(ARGV[1])
if now < 0 then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
end
