-- For bench/wrk.py. With an argument (wrk ... -- FILE), each request asks for a path drawn at
-- random from FILE (one path per line); without, the URL's own path. At the end wrk's report is
-- written as one JSON line: requests, errors (answers other than 2xx/3xx, and socket errors), and
-- latency percentiles in milliseconds.
local paths = nil

init = function(args)
  if args[1] then
    paths = {}
    for line in io.lines(args[1]) do
      if line ~= "" then paths[#paths + 1] = line end
    end
    math.randomseed(os.time() + math.floor(os.clock() * 1e6))
  end
end

request = function()
  if paths then
    return wrk.format(nil, paths[math.random(#paths)])
  end
  return wrk.format()
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "errors": %d, "p50_ms": %.2f, "p95_ms": %.2f, "p99_ms": %.2f, "max_ms": %.2f, "seconds": %.3f}\n',
    summary.requests, e.status + e.connect + e.read + e.write + e.timeout,
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000, summary.duration / 1e6))
end
