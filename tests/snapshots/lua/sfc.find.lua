-- microdcs unique lookup for `SfcState`. Generated; do not edit.
-- KEYS[1] the unique index key (string holding a document id)
-- ARGV[1] the key prefix
-- Returns: nil when the index key is absent, else
--   {id, v, scope, ops, doc, due, active, type_id, waits} of the document (fields false when absent;
--   `ops` so a read found here carries its revision like any other read)
local id = redis.call('GET', KEYS[1])
if not id then return nil end
local function enc(v) return (string.gsub(v, '[%z\001\002\003\004\005\006\007\008\009\010\011\012\013\014\015\016\017\018\019\020\021\022\023\024\025\026\027\028\029\030\031\032%%%*%:%?%[%\\%]%{%|%}\127]', function(c) return string.format('%%%02X', string.byte(c)) end)) end
local r = redis.call('HMGET', ARGV[1] .. ':sfc:state:' .. enc(id), 'v', 'scope', 'ops', 'doc', 'due', 'active', 'type_id', 'waits')
table.insert(r, 1, id)
return r
