-- wrk script used by bench/http.py: when the run ends, prints one line of
-- key=value pairs that http.py parses. Latencies are in microseconds.
--
-- There is deliberately no request() or response() callback: either one
-- takes wrk off its fast path and slows the load generator. wrk already
-- counts every response with a status of 400 or more in
-- summary.errors.status, which is the "non-2xx/3xx" count we report.

done = function(summary, latency, requests)
    local errors = summary.errors
    io.write(string.format(
        "hearth-bench-report requests=%.0f duration_us=%.0f bytes=%.0f"
            .. " p50_us=%.0f p99_us=%.0f mean_us=%.0f max_us=%.0f"
            .. " errors_connect=%.0f errors_read=%.0f errors_write=%.0f"
            .. " errors_timeout=%.0f errors_status=%.0f\n",
        summary.requests, summary.duration, summary.bytes,
        latency:percentile(50), latency:percentile(99), latency.mean, latency.max,
        errors.connect, errors.read, errors.write,
        errors.timeout, errors.status
    ))
end
