-- GET a random topic's route among T0..T(n-1); n from the environment-free first argument.
local n = 1000
function init(args)
  if args[1] then n = tonumber(args[1]) end
  math.randomseed(os.time() + math.random(1, 100000))
end
function request()
  return wrk.format("GET", "/v1/topics/T" .. math.random(0, n - 1) .. "/route")
end
