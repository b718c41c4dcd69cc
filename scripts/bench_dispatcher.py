#!/usr/bin/env python3
"""Dispatcher benchmark: the dispatcher alone, fed by dispatcher_load (many
fake supervisors over real ZeroMQ sockets and the cluster-secret handshake;
tests/src/bin/dispatcher_load.rs), with a real store. Run it through
scripts/bench-dispatcher.sh, which builds first.

    scripts/bench-dispatcher.sh --urls 1000000
    scripts/bench-dispatcher.sh --urls 200000 --dispatcher-arg=--frontier-memory-urls=20000
    scripts/bench-dispatcher.sh --stored-urls 10000000

It runs one crawl of --urls URLs (the dispatcher's --max-pages), stops its
dispatcher once --stop-at of them are fetched (half, by default, with
SIGTERM: --stop-signal kill for kill -9; --stop-at 1 runs the crawl to its
end), then starts the dispatcher again on the stored frontier, times its
start-up and feeds it --after-restart results: a restart with the rest of
the crawl still to do, as after an operator's stop or a crash.
Prints a JSON object on stdout (a summary on stderr):
- [urls_per_s]: leases out plus results in, per second of the crawl, as
  dispatcher_load counted them; [dispatcher_cpu_secs] and
  [dispatcher_cores]: the dispatcher's CPU over the crawl;
  [urls_per_cpu_s]: leases out plus results in per dispatcher CPU second
  (the rate one core would keep up were the store not the limit);
  [store_cpu_secs], [load_cpu_secs]: the store's and the load generator's
  (the dispatcher's rivals for the machine's cores).
- [bytes_per_known_url]: dispatcher VmRSS over the URLs it knows (its
  `crawler_frontier_seen` gauge), at the first sample past each power of
  ten from 10,000 and at the end; [bytes_per_known_url_marginal]: the
  growth of VmRSS over the growth of known URLs since the power of ten
  before (what one more URL costs, without the process's fixed memory);
  [peak_rss_mib].
- [startup_s]: from starting the dispatcher on the stored frontier (same
  store, same crawl id, a --max-pages ten times higher, or
  --restart-max-pages) until its ZeroMQ
  endpoint accepts connections: it binds only once it has read the stored
  frontier and can dispatch (its /metrics answers long before, so it is
  no signal); [startup_dispatcher_cpu_s], [startup_store_cpu_s]: who
  spent it.
- [startup_rss_mib], [startup_bytes_per_known_url]: the restarted
  dispatcher's VmRSS once it accepts connections, and that over the URLs
  it read back.
- [stopped_at_results]: the results fetched when the crawl was stopped.
- [resumed_active_urls_per_s], [resumed_over_crawl]: the restarted
  dispatcher's rate from the load generator's first lease to its last
  result (without the joining and leaving around them, which weigh in a
  short run), and that over the crawl's rate measured the same way.
- [resumed_results_s], [resumed_urls_per_s]: the restarted dispatcher
  fed by the load generator until --after-restart results (its first
  leases wait for the domains' windows to be read from the store). The
  load generator stores no pages, so only what the dispatcher recorded as
  finished (its domains' progress) is not leased again.
- [store]: which store server ran.

With --stored-urls N there is no crawl: tests/src/bin/frontier_fill.rs
writes a frontier of N URLs straight into the store (half of them still
queued, over --domains domains, as a crawl stopped midway leaves it;
[fill_s]), and only the start-up is timed: the way to time it on 10
million URLs without crawling them first. With --store-dir DIR (a store
started by `scripts/store.sh start DIR --persist`, left running) the fill
is done once and kept (DIR/bench-dispatcher-fill.json says what it wrote),
so the start-up can be timed again, build against build, without writing
10 million URLs each time (43 minutes on nx-27017 on 2026-11-27).
"""
import argparse, json, os, secrets, signal, socket, subprocess, sys, tempfile, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import ROOT, TICK, free_port, rss_kib  # noqa: E402

# The binaries: $CRAWLER_BIN_DIR (as the tests take it), else the release
# directory of $CARGO_TARGET_DIR or target/.
BIN = os.environ.get("CRAWLER_BIN_DIR") or os.path.join(
    os.path.abspath(os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")), "release")
CRAWL_ID = "bench-dispatcher"


def cpu_secs(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, ValueError, IndexError):
        return None


def gauges(debug, *names):
    """Gauges from one read of the dispatcher's /metrics (None where
    missing): one read per sample, as rendering costs the dispatcher CPU
    this bench counts."""
    found = dict.fromkeys(names)
    try:
        with urllib.request.urlopen(f"http://{debug}/metrics", timeout=2) as r:
            for line in r.read().decode().splitlines():
                name, _, value = line.partition(" ")
                # A labelled family counts as the sum of its series.
                name = name.split("{", 1)[0]
                if name in found:
                    found[name] = (found[name] or 0.0) + float(value.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return [found[n] for n in names]


def accepts(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def main():
    # SIGTERM ends the run like Ctrl-C: the `finally` below stops what it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(129))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urls", type=int, default=1_000_000, help="URLs the crawl admits (--max-pages)")
    ap.add_argument("--stored-urls", type=int, default=0,
                    help="no crawl: time the start-up on this many URLs written straight into the store")
    ap.add_argument("--queued-share", type=float, default=0.5, help="with --stored-urls: share still queued")
    ap.add_argument("--supervisors", type=int, default=50)
    ap.add_argument("--domains", type=int, default=10_000)
    ap.add_argument("--links", type=int, default=20, help="links per result")
    ap.add_argument("--urls-per-domain", type=int, default=0,
                    help="new URL n goes to domain n / K: a stream of domains, each linked K times "
                         "and never again (the long tail of a real crawl; the crawl's scope is then any)")
    ap.add_argument("--dispatcher-arg", action="append", default=[], help="extra dispatcher flag")
    ap.add_argument("--startup-limit", type=float, default=600,
                    help="stop waiting for the restarted dispatcher after this many seconds")
    ap.add_argument("--after-restart", type=int, default=20_000,
                    help="results the load generator sends the restarted dispatcher (0: none)")
    ap.add_argument("--stop-at", type=float, default=0.5, metavar="SHARE",
                    help="stop the crawl's dispatcher once this share of --urls is fetched, so that the "
                         "restart has the rest to crawl (1: the crawl runs to its end)")
    ap.add_argument("--restart-max-pages", type=int, default=0, metavar="N",
                    help="the restarted dispatcher's --max-pages (default ten times --urls: it admits the "
                         "results' new links again, which the crawl had stopped doing once --urls were "
                         "admitted; --urls restarts the crawl as an operator would, with its own config)")
    ap.add_argument("--stop-signal", choices=("term", "kill"), default="term",
                    help="how the crawl's dispatcher is stopped at --stop-at: SIGTERM (it writes what it "
                         "holds and every domain's progress) or SIGKILL")
    ap.add_argument("--keep", action="store_true", help="keep the work directory and print it")
    ap.add_argument("--store-dir", help="use the running store of `scripts/store.sh start DIR --persist`; "
                                        "with --stored-urls, fill it once and reuse the fill")
    args = ap.parse_args()
    if args.store_dir and not args.stored_urls:
        # A crawl into a kept store would resume whatever an earlier run left there.
        ap.error("--store-dir needs --stored-urls: it keeps a fill for timing start-ups, not a crawl")

    work = tempfile.mkdtemp(prefix="crawler-bench-dispatcher-")
    if args.store_dir:
        store_dir = os.path.abspath(args.store_dir)
        uri = open(os.path.join(store_dir, "uri")).read().strip()
    else:
        store_dir = os.path.join(work, "store")
        uri = subprocess.check_output([os.path.join(ROOT, "scripts", "store.sh"), "start", store_dir],
                                      text=True).strip()
    kind = open(os.path.join(store_dir, "kind")).read().strip()
    store_pid = int(open(os.path.join(store_dir, "pid")).read())
    procs = []
    result = {"urls": args.urls, "supervisors": args.supervisors, "domains": args.domains, "store": kind}
    try:
        seeds = os.path.join(work, "seeds.txt")
        with open(seeds, "w") as f:
            for i in range(args.domains):
                f.write(f"http://d{i}.test/\n")
        env = dict(os.environ, CRAWLER_CLUSTER_SECRET=secrets.token_hex(32))

        def dispatcher(log, max_pages):
            port, debug_port = free_port(), free_port()
            cmd = [os.path.join(BIN, "dispatcher"), "--mongo-uri", uri, "--crawl-id", CRAWL_ID,
                   "--bind", f"tcp://127.0.0.1:{port}",
                   "--debug-addr", f"127.0.0.1:{debug_port}", "--seeds", seeds,
                   "--min-supervisors", str(args.supervisors), "--max-pages", str(max_pages),
                   "--max-depth", "1000", "--progress-secs", "10", "--monitor-secs", "0",
                   "--summary-file", os.path.join(work, f"{log}.summary.json")] + args.dispatcher_arg
            if args.urls_per_domain:
                cmd += ["--scope", "any"]
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, f"{log}.log"), "w"), env=env)
            procs.append(p)
            return p, port, f"127.0.0.1:{debug_port}"

        kept_fill = os.path.join(store_dir, "bench-dispatcher-fill.json") if args.store_dir else None
        if args.stored_urls and kept_fill and os.path.exists(kept_fill):
            # 1. The frontier an earlier run wrote into this store.
            filled = json.load(open(kept_fill))
            if filled["urls"] != args.stored_urls or filled["domains"] != args.domains:
                raise SystemExit(f"{store_dir} holds a fill of {filled}; use another --store-dir")
            result.update(urls=filled["urls"], fill_s="kept", stored_queued=filled["queued"])
        elif args.stored_urls:
            # 1. A frontier written straight into the store.
            fill = subprocess.run([os.path.join(BIN, "frontier_fill"), "--mongo-uri", uri, "--crawl-id", CRAWL_ID,
                                   "--urls", str(args.stored_urls), "--domains", str(args.domains),
                                   "--queued-share", str(args.queued_share)],
                                  stdout=subprocess.PIPE, stderr=open(os.path.join(work, "fill.log"), "w"),
                                  text=True, check=True)
            filled = json.loads(fill.stdout.strip().splitlines()[-1])
            result.update(urls=filled["urls"], fill_s=filled["seconds"], stored_queued=filled["queued"])
            if kept_fill:
                with open(kept_fill, "w") as f:
                    json.dump(filled, f)
        else:
            # 1. The crawl.
            d, port, debug = dispatcher("crawl", args.urls)
            while not accepts(port):
                if d.poll() is not None:
                    raise SystemExit(f"the dispatcher exited ({d.returncode}); see {work}/crawl.log")
                time.sleep(0.1)
            load = subprocess.Popen([os.path.join(BIN, "dispatcher_load"), "--dispatcher", f"tcp://127.0.0.1:{port}",
                                     "--supervisors", str(args.supervisors), "--domains", str(args.domains),
                                     "--links", str(args.links), "--urls", str(args.urls),
                                     "--urls-per-domain", str(args.urls_per_domain)],
                                    stdout=subprocess.PIPE, stderr=open(os.path.join(work, "load.log"), "w"), env=env, text=True)
            procs.append(load)
            store_cpu0, others = cpu_secs(store_pid) or 0.0, {}
            marks, marginal, samples, peak, cpu, peak_domains = {}, {}, [], 0, 0.0, 0
            next_mark, last_mark = 10_000, None
            t0 = time.time()
            stop_at, stopped = args.stop_at * args.urls, False
            while d.poll() is None:
                seen, domains, fetched = gauges(debug, "crawler_frontier_seen", "crawler_frontier_domains",
                                                "crawler_dispatcher_results_total")
                if not stopped and args.stop_at < 1 and (fetched or 0) >= stop_at:
                    d.send_signal(signal.SIGTERM if args.stop_signal == "term" else signal.SIGKILL)
                    stopped = True
                    result["stopped_at_results"] = int(fetched)
                rss, c = rss_kib(d.pid), cpu_secs(d.pid)
                if rss and seen:
                    peak = max(peak, rss)
                    samples.append((round(time.time() - t0, 1), round(rss / 1024, 1), int(seen)))
                    if seen >= next_mark:
                        while seen >= next_mark * 10:  # (passed more than one power of ten since)
                            next_mark *= 10
                        marks[str(next_mark)] = round(rss * 1024 / seen, 1)
                        if last_mark and seen > last_mark[1]:
                            marginal[str(next_mark)] = round((rss - last_mark[0]) * 1024 / (seen - last_mark[1]), 1)
                        last_mark = (rss, seen)
                        next_mark *= 10
                cpu = c if c is not None else cpu
                peak_domains = max(peak_domains, domains or 0)
                for name, pid in (("store", store_pid), ("load", load.pid)):
                    c = cpu_secs(pid)
                    others[name] = c if c is not None else others.get(name, 0.0)
                time.sleep(0.5)
            out, _ = load.communicate(timeout=120)
            lines = [line for line in out.splitlines() if line.startswith("{")]
            result["load"] = json.loads(lines[-1]) if lines else None
            result["urls_per_s"] = result["load"]["urls_per_s"] if result["load"] else None
            result["dispatcher_exit"] = d.returncode
            result["dispatcher_cpu_secs"] = round(cpu, 1)
            secs = result["load"]["seconds"] if result["load"] else None
            result["dispatcher_cores"] = round(cpu / secs, 2) if secs else None
            # What one core would do were the store not the limit.
            events = (result["load"]["leases_received"] + result["load"]["results_sent"]) if result["load"] else 0
            result["urls_per_cpu_s"] = round(events / cpu) if cpu else None
            # Who else worked meanwhile: on 2 cores, the load generator and the
            # store share the machine with the dispatcher.
            result["store_cpu_secs"] = round(others.get("store", store_cpu0) - store_cpu0, 1)
            result["load_cpu_secs"] = round(others.get("load", 0.0), 1)
            try:
                summary = json.load(open(os.path.join(work, "crawl.summary.json")))
            except (OSError, ValueError):
                summary = {}
            known = summary.get("seen_urls") or (samples[-1][2] if samples else 0)
            # Domains held in memory at most (sampled), and forgotten once
            # nothing was left of them (`--forget-idle-domains-ms`).
            result["domains_held_peak"] = int(peak_domains)
            result["domains_forgotten"] = summary.get("domains_forgotten")
            if samples and known:
                # The last RSS sample against the summary's count (the gauge is
                # set once a second and may lag).
                marks["end"] = round(samples[-1][1] * 1024 * 1024 / known, 1)
            result["known_urls_at_end"] = known
            result["bytes_per_known_url"] = marks
            result["bytes_per_known_url_marginal"] = marginal
            result["peak_rss_mib"] = round(peak / 1024, 1)
            result["rss_mib_and_known_urls"] = samples[:: max(1, len(samples) // 20)]

        # 2. Start-up on the stored frontier.
        started, store_cpu1 = time.time(), cpu_secs(store_pid) or 0.0
        result["restart_max_pages"] = args.restart_max_pages or result["urls"] * 10
        d, port, debug = dispatcher("restart", result["restart_max_pages"])
        while not accepts(port):
            if d.poll() is not None:
                raise SystemExit(f"the restarted dispatcher exited ({d.returncode}); see {work}/restart.log")
            if time.time() - started > args.startup_limit:
                break
            time.sleep(0.05)
        up = accepts(port)
        result["startup_s"] = round(time.time() - started, 2) if up else f"over {args.startup_limit:.0f}"
        rss = rss_kib(d.pid) or 0
        result["startup_rss_mib"] = round(rss / 1024, 1)
        result["startup_bytes_per_known_url"] = round(rss * 1024 / result["urls"], 1) if up and result["urls"] else None
        # Who spent the start-up: the dispatcher (decoding and indexing what
        # it reads) or the store (scanning). On a faster store the
        # dispatcher's share is what is left.
        result["startup_dispatcher_cpu_s"] = round(cpu_secs(d.pid) or 0.0, 1)
        result["startup_store_cpu_s"] = round((cpu_secs(store_pid) or 0.0) - store_cpu1, 1)

        # 3. The resumed crawl: its first results, while the windows are
        # read from the store and the seen-set is filled behind it.
        if up and args.after_restart > 0:
            t1 = time.time()
            load = subprocess.Popen([os.path.join(BIN, "dispatcher_load"), "--dispatcher", f"tcp://127.0.0.1:{port}",
                                     "--supervisors", str(args.supervisors), "--domains", str(args.domains),
                                     "--links", str(args.links), "--urls", str(args.after_restart),
                                     "--urls-per-domain", str(args.urls_per_domain),
                                     "--max-secs", str(int(args.startup_limit))],
                                    stdout=subprocess.PIPE, stderr=open(os.path.join(work, "restart-load.log"), "w"),
                                    env=env, text=True)
            procs.append(load)
            out, _ = load.communicate(timeout=args.startup_limit + 60)
            lines = [line for line in out.splitlines() if line.startswith("{")]
            resumed = json.loads(lines[-1]) if lines else None
            result["resumed_load"] = resumed
            result["resumed_results_s"] = round(time.time() - t1, 1)
            result["resumed_urls_per_s"] = resumed["urls_per_s"] if resumed else None
            # From its first lease to its last result: a short run is
            # otherwise mostly joining (the restarted dispatcher waits for
            # every supervisor before it leases) and leaving.
            result["resumed_active_urls_per_s"] = resumed.get("active_urls_per_s") if resumed else None
            crawl_active = (result.get("load") or {}).get("active_urls_per_s")
            if crawl_active and result["resumed_active_urls_per_s"]:
                result["resumed_over_crawl"] = round(result["resumed_active_urls_per_s"] / crawl_active, 2)
        d.terminate()
        try:
            # It waits for its supervisors to leave; the fake ones may be gone.
            d.wait(timeout=60)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if not args.store_dir:
            subprocess.call([os.path.join(ROOT, "scripts", "store.sh"), "stop", store_dir])
    print(json.dumps(result, indent=1))
    print(f"dispatcher: {result.get('urls_per_s')} URLs/s (leases out + results in), "
          f"{result.get('dispatcher_cpu_secs')} CPU s ({result.get('dispatcher_cores')} cores, "
          f"{result.get('urls_per_cpu_s')} URLs per CPU s); "
          f"bytes per known URL {result.get('bytes_per_known_url')} "
          f"(marginal {result.get('bytes_per_known_url_marginal')}); peak RSS {result.get('peak_rss_mib')} MiB; "
          f"start-up on {result.get('urls')} stored URLs {result.get('startup_s')} s ({kind}; CPU s: dispatcher "
          f"{result.get('startup_dispatcher_cpu_s')}, store {result.get('startup_store_cpu_s')}; "
          f"RSS {result.get('startup_rss_mib')} MiB, {result.get('startup_bytes_per_known_url')} B per URL); "
          f"then {args.after_restart} results in {result.get('resumed_results_s')} s "
          f"({result.get('resumed_urls_per_s')} URLs/s; from the first lease "
          f"{result.get('resumed_active_urls_per_s')} URLs/s, {result.get('resumed_over_crawl')} of the crawl's "
          f"{(result.get('load') or {}).get('active_urls_per_s')})",
          file=sys.stderr)
    if args.keep:
        print(f"kept {work}", file=sys.stderr)
    else:
        import shutil
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
