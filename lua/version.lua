--[[ version.lua — glidemq_version. Read-only.
  KEYS     none.
  ARGV     none.
  Returns  JSON text {"version": "<hash of the Lua source>", "package": "<package version>"}.
  Errors   ERR_INVALID (any argument). The loader substitutes the placeholders; the hash is taken
           before substitution.
]]
do -- this file's locals end here: the library's main chunk may hold at most 200 locals
local VERSION_ARGS = {}

register('glidemq_version', function(_, args)
  decodeArgs('glidemq_version', args, VERSION_ARGS)
  return '{"version":"__GLIDEMQ_LIBRARY_VERSION__","package":"__GLIDEMQ_PACKAGE_VERSION__"}'
end, { 'no-writes' })
end
