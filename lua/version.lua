--[[ version.lua — glidemq_version
  KEYS: none.  ARGV: none.
  Returns: JSON text {"version": "<hash of the Lua source>", "package": "<package version>"}.
  Errors: none. The loader substitutes the placeholders; the hash is taken before substitution.
]]
redis.register_function{
  function_name = 'glidemq_version',
  callback = function()
    return '{"version":"__GLIDEMQ_LIBRARY_VERSION__","package":"__GLIDEMQ_PACKAGE_VERSION__"}'
  end,
  flags = { 'no-writes' },
}
