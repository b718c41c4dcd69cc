#!/usr/bin/env python3
"""Kill -9 chaos benchmark: crawls the same synthetic web as bench.py, with
the same processes and flags, while SIGKILLing a crawler process every few
seconds, and prints how many page fetches the crawl made per stored page,
counted by the web server itself. A short human summary goes to stderr (with
a line for every kill), the JSON result to stdout.

    scripts/chaos.py                              # the issue's set-up: realistic web, 2 supervisors x 2 children,
                                                  # a kill every 3 s, 24 kills
    scripts/chaos.py --hosts 20 --pages-per-host 60 --every 2 --kills 6   # a small web, about a minute

It uses the built binaries (target/release, or --crawler-bin-dir; build them
first with `cargo build --release --workspace --bins`) and starts, as
bench.py does: a store (scripts/store.sh), synthweb with --request-log, one
dispatcher and --supervisors supervisors x --children children, with the
profile's dispatcher flags (bench.py PROFILES) and a fresh cluster secret.

Every --every seconds (default 3) it kills with SIGKILL, in turn:
- a crawler-child: a random child process (found in /proc, named
  crawler-child) of a random supervisor; the supervisor restarts it itself
  (the line `respawned after` says when its new child appeared);
- a supervisor: restarted 1 s later with the same command line (same --id),
  as a service manager would; its children die with it (PDEATHSIG);
- the dispatcher: restarted 1 s later with the same command line (same
  --bind, store, seeds and flags), so it resumes the crawl from the store.
It stops after --kills kills (default 24) or when the dispatcher has exited
on its own, then waits (--finish-timeout, default 15 min) for the dispatcher
to finish the crawl and for the supervisors to leave. The summary file is the
one written by the dispatcher that finished the crawl.

Figures (the JSON keys are in brackets):
- [page_fetches]: requests in synthweb's request log whose path is not
  /robots.txt (every answered request, redirects and 404s included; the log
  records host, path, status, time). [fetches_per_stored_page] = that /
  [stored_pages]. Without kills it is already a little above 1: a followed
  same-host redirect costs two requests for one stored page (on the
  realistic web a redirect leads to a page that is linked and stored under
  its own URL too, such as /r/0 -> /p/0: /p/0 is fetched twice in any
  crawl). So also [fetches_per_stored_page_less_redirects]: ([page_fetches]
  - the 3xx answers, [redirect_fetches]) / [stored_pages], 1.0 for a crawl
  that fetched nothing twice.
- [fetches_per_url_histogram]: how many distinct URLs (host + path) were
  fetched once, twice, 3 or more times; [most_fetched] the top ones.
- [stored_pages]: documents in the crawl's pages collection (`crawl__pages`,
  the default crawl id's, in database CRAWLER_DB or `crawler`), counted by
  reading every `_id` back; [stored_twice] = `_id`s seen more than once
  (a unique `_id` makes it 0).
- [lost]: synthweb's --write-info lists the ground truth's counts, not its
  URLs, so lost = the stored pages missing per expected status (sum over
  statuses of max(0, expected - stored)); [lost_by_count] is simply
  [expected_pages] - [stored_pages], [by_status] both sides.
- [kills]: every kill ({victim, at_secs, pid, ...}), at_secs from the first
  dispatcher start; [wall_secs]: that start to the exit of every crawler
  process; [store]: mongod or nx-27017; [summary]: the finishing
  dispatcher's finish_reason, frontier_left, fetched (its own count only);
  [frontier_states]: the stored frontier: its segments, the URLs in them
  by the segments' state, and the outcomes (failed, disallowed) by state.

Exit status 0 when the crawl finished (the dispatcher exited 0 on its own),
nothing was lost and nothing stored twice; 1 otherwise (the work directory
is then kept and printed, as with --keep).
"""
import argparse, collections, json, os, random, secrets, shutil, signal, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (helpers: free_port, parents, store_python, read_request_log, profiles)

ROOT, BIN = bench.ROOT, bench.BIN
VICTIMS = ("crawler-child", "supervisor", "dispatcher")
RESTART_AFTER = 1.0

# Run with the store's Python (pymongo): every page's _id and status, and
# the frontier's segments and outcomes. Prints one JSON object.
PAGES_QUERY = r"""
import collections, json, sys
import pymongo
uri, db_name, crawl = sys.argv[1], sys.argv[2], sys.argv[3]
db = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000)[db_name]
ids, by_status = collections.Counter(), collections.Counter()
for d in db[crawl + "__pages"].find({}, {"_id": 1, "status": 1}):
    ids[d["_id"]] += 1
    by_status[str(d.get("status"))] += 1
out = {"documents": sum(ids.values()), "distinct_ids": len(ids),
       "stored_twice": sum(1 for n in ids.values() if n > 1), "by_status": dict(by_status)}
try:
    # The frontier's URLs in segments (their states are not stored: a
    # fetched URL's page says it is finished), and the outcomes of those
    # that ended without a page.
    segs = list(db[crawl + "__segments"].find({}, {"n": 1, "state": 1}))
    states = collections.Counter()
    for d in segs:
        states["in_" + str(d.get("state")) + "_segments"] += int(d.get("n") or 0)
    for o in db[crawl + "__outcomes"].find({}, {"urls.state": 1}):
        for u in o.get("urls") or []:
            states[str(u.get("state"))] += 1
    states["segments"] = len(segs)
    out["frontier_states"] = dict(states)
except Exception as e:
    out["frontier_states"] = {"error": str(e)[:200]}
print(json.dumps(out))
"""

T0 = time.time()


def log(msg):
    print(f"chaos [{time.time() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def alive(pid):
    """Whether pid is a live process (a zombie counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return stat[stat.rindex(")") + 2] != "Z"
    except (OSError, ValueError, IndexError):
        return False


def child_pids(pid):
    """The live crawler-child processes whose parent is pid."""
    return sorted(p for p, pp in bench.parents().items() if pp == pid and comm(p) == "crawler-child" and alive(p))


def last_progress(path):
    """The pages count of the last progress line of the dispatcher running
    now (after the last start marker in its log), or None."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            tail = f.read().decode(errors="replace")
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        if line.startswith("==== chaos.py: start"):
            return None
        at = line.find("] pages ")
        if at >= 0:
            try:
                return int(line[at + len("] pages "):].split()[0])
            except (ValueError, IndexError):
                continue
    return None


class Proc:
    """One crawler process that chaos.py (re)starts with the same command
    line; every incarnation's output is appended to the same log."""

    def __init__(self, name, cmd, log_path, env, stdout_path=None):
        self.name, self.cmd, self.log_path, self.env, self.stdout_path = name, cmd, log_path, env, stdout_path
        self.popen, self.all, self.starts = None, [], 0

    def start(self):
        self.starts += 1
        err = open(self.log_path, "a")
        err.write(f"==== chaos.py: start #{self.starts} of {self.name} at {time.time() - T0:.1f}s\n")
        err.flush()
        out = open(self.stdout_path, "a") if self.stdout_path else subprocess.DEVNULL
        self.popen = subprocess.Popen(self.cmd, stdout=out, stderr=err, env=self.env)
        err.close()
        if self.stdout_path:
            out.close()
        self.all.append(self.popen)
        return self.popen.pid

    @property
    def pid(self):
        return self.popen.pid

    def poll(self):
        return self.popen.poll()

    def kill9(self):
        self.popen.send_signal(signal.SIGKILL)
        return self.popen.wait()


def histogram(request_log):
    """Fetches per URL (host + path) of the non-robots.txt requests."""
    per_url, redirects = collections.Counter(), 0
    try:
        for r in bench.request_records(request_log):
            if r.get("path") != "/robots.txt":
                per_url[(r.get("host"), r.get("path"))] += 1
                redirects += 300 <= r.get("status", 0) < 400
    except OSError:
        return None
    times = collections.Counter(min(n, 3) for n in per_url.values())
    return {
        "page_fetches": sum(per_url.values()),
        "distinct_urls": len(per_url),
        "redirects": redirects,
        "histogram": {"1": times[1], "2": times[2], "3+": times[3]},
        "most_fetched": [[f"{h}{p}", n] for (h, p), n in per_url.most_common(5) if n > 1],
    }


def query_pages(uri, db, crawl):
    py = bench.store_python()
    if py is None:
        return {"error": "no Python with pymongo (.venv-store is made by scripts/store.sh install)"}
    r = subprocess.run([py, "-c", PAGES_QUERY, uri, db, crawl], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-500:]}
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", choices=sorted(bench.PROFILES), default="realistic")
    ap.add_argument("--hosts", type=int, help="default: the profile's (realistic 200, small 50)")
    ap.add_argument("--pages-per-host", type=int, help="default: the profile's (realistic 250, small 400)")
    ap.add_argument("--supervisors", type=int, default=2)
    ap.add_argument("--children", type=int, default=2)
    ap.add_argument("--every", type=float, default=3.0, metavar="SECS", help="a kill every SECS seconds")
    ap.add_argument("--kills", type=int, default=24, metavar="N", help="stop killing after N kills (or when the crawl ends)")
    ap.add_argument("--seed", type=int, help="seed of the random choice of victims (default: a random one, printed)")
    ap.add_argument("--finish-timeout", type=float, default=900, metavar="SECS",
                    help="after the last kill, how long to wait for the dispatcher to finish the crawl")
    ap.add_argument("--dispatcher-arg", action="append", default=[], help="extra dispatcher flag (after the profile's)")
    ap.add_argument("--supervisor-arg", action="append", default=[])
    ap.add_argument("--web-arg", action="append", default=[], help="extra synthweb flag")
    ap.add_argument("--crawler-bin-dir", default=BIN,
                    help="where dispatcher, supervisor and crawler-child are; synthweb always comes from this tree")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, request log, the store's data) and print it")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    rng = random.Random(seed)
    # SIGTERM (as Ctrl-C) still runs the clean-up below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    hosts, pages_per_host = bench.DEFAULT_COUNTS[args.profile]
    hosts = args.hosts if args.hosts is not None else hosts
    pages_per_host = args.pages_per_host if args.pages_per_host is not None else pages_per_host
    work = tempfile.mkdtemp(prefix="crawler-chaos-")
    uri, kind, store_dir = bench.start_store(work, args.keep)
    db = os.environ.get("CRAWLER_DB", "crawler")
    crawl = "crawl"  # the dispatcher's default --crawl-id: collections crawl__pages, crawl__segments
    web, dispatcher, sups, ok = None, None, [], False
    try:
        web, paths, info = bench.start_web(args, work, hosts, pages_per_host)
        seeds, hosts_file, request_log = paths["seeds"], paths["hosts"], paths["request_log"]
        endpoint = f"tcp://127.0.0.1:{bench.free_port()}"
        common = ["--mongo-uri", uri]
        crawler_env = dict(os.environ, CRAWLER_CLUSTER_SECRET=secrets.token_hex(32))
        summary_file = os.path.join(work, "summary.json")
        dispatcher_flags = bench.PROFILES[args.profile] + args.dispatcher_arg
        dispatcher = Proc(
            "dispatcher",
            [os.path.join(args.crawler_bin_dir, "dispatcher"), "--bind", endpoint, "--seeds", seeds,
             "--min-supervisors", str(args.supervisors), "--summary-file", summary_file, "--progress-secs", "5"]
            + common + dispatcher_flags,
            os.path.join(work, "dispatcher.log"), crawler_env, stdout_path=os.path.join(work, "dispatcher.out"))
        sups = [Proc(
            f"sup{i}",
            [os.path.join(args.crawler_bin_dir, "supervisor"), "--dispatcher", endpoint, "--id", f"sup{i}",
             "--children", str(args.children), "--hosts-file", hosts_file] + common + args.supervisor_arg,
            os.path.join(work, f"supervisor{i}.log"), crawler_env) for i in range(args.supervisors)]
        log(f"seed {seed}; store {kind} at {uri}; work directory {work}")
        global T0
        started = T0 = time.time()  # log times and at_secs count from the dispatcher's first start
        dispatcher.start()
        for s in sups:
            s.start()
        log(f"started dispatcher pid {dispatcher.pid}, supervisors "
            + ", ".join(f"{s.name} pid {s.pid}" for s in sups))
        at = lambda: round(time.time() - started, 1)

        kills = []
        respawn = {}  # supervisor index -> (kill record, kill time, children before the kill)
        gone_on_their_own = set()  # supervisor Popens that exited without a kill (logged once)
        finished_on_its_own = None
        next_kill = started + args.every

        def watch():
            """Logs children that supervisors started after a child kill, and
            supervisors that exited without being killed."""
            for i, (rec, t, before) in list(respawn.items()):
                fresh = [p for p in child_pids(sups[i].pid) if p not in before]
                if fresh:
                    rec["respawn_secs"] = round(time.time() - t, 2)
                    log(f"  {sups[i].name} started a new crawler-child pid {fresh[0]}, "
                        f"respawned after {rec['respawn_secs']} s")
                    del respawn[i]
            for s in sups:
                if s.poll() is not None and s.popen not in gone_on_their_own:
                    gone_on_their_own.add(s.popen)
                    log(f"{s.name} pid {s.pid} exited on its own with status {s.poll()}")

        def kill_child():
            order = list(range(len(sups)))
            rng.shuffle(order)
            for i in order:
                kids = child_pids(sups[i].pid)
                if kids and i not in respawn:
                    pid = rng.choice(kids)
                    os.kill(pid, signal.SIGKILL)
                    rec = {"victim": "crawler-child", "at_secs": at(), "pid": pid, "supervisor": sups[i].name}
                    log(f"kill #{len(kills) + 1}: SIGKILL crawler-child pid {pid} of {sups[i].name} "
                        f"(its children were {kids})")
                    respawn[i] = (rec, time.time(), set(kids))
                    return rec
            log("no crawler-child to kill now (none running, or all just killed); trying again next time")
            return None

        def kill_supervisor():
            i = rng.randrange(len(sups))
            s = sups[i]
            if s.poll() is not None:
                log(f"{s.name} is not running (exited {s.poll()}); not killed")
                return None
            kids = child_pids(s.pid)
            rec = {"victim": "supervisor", "at_secs": at(), "pid": s.pid, "supervisor": s.name}
            status = s.kill9()
            respawn.pop(i, None)
            if status == 0:
                log(f"{s.name} pid {rec['pid']} had just exited on its own (status 0): not killed, not restarted")
                return None
            log(f"kill #{len(kills) + 1}: SIGKILL supervisor {s.name} pid {rec['pid']} (exit {status}); "
                f"restarting it in {RESTART_AFTER:.0f} s")
            time.sleep(RESTART_AFTER)
            left = [p for p in kids if alive(p)]
            if dispatcher.poll() is not None:
                log(f"  the dispatcher has exited ({dispatcher.poll()}): {s.name} not restarted")
                rec["restarted_pid"] = None
                return rec
            rec["restarted_pid"] = s.start()
            rec["children_left_alive"] = len(left)
            log(f"  restarted {s.name}: pid {rec['restarted_pid']}; its {len(kids)} children "
                + ("all gone" if not left else f"still alive: {left}"))
            return rec

        def kill_dispatcher():
            if dispatcher.poll() is not None:
                return None
            rec = {"victim": "dispatcher", "at_secs": at(), "pid": dispatcher.pid,
                   "pages_at_last_progress": last_progress(dispatcher.log_path)}
            status = dispatcher.kill9()
            if status == 0:
                log(f"the dispatcher pid {rec['pid']} had just exited on its own (status 0): not killed")
                return None  # the main loop sees the exit
            pages = rec["pages_at_last_progress"]
            log(f"kill #{len(kills) + 1}: SIGKILL dispatcher pid {rec['pid']} (exit {status}; "
                + (f"its last progress line: {pages} pages" if pages is not None else "no progress line yet")
                + f"); restarting it in {RESTART_AFTER:.0f} s")
            time.sleep(RESTART_AFTER)
            rec["restarted_pid"] = dispatcher.start()
            log(f"  restarted the dispatcher: pid {rec['restarted_pid']} (start #{dispatcher.starts})")
            return rec

        while True:
            rc = dispatcher.poll()
            if rc is not None:
                finished_on_its_own = rc
                log(f"the dispatcher exited on its own with status {rc}: no more kills")
                break
            if len(kills) >= args.kills:
                log(f"{len(kills)} kills done: waiting for the crawl to finish")
                break
            watch()
            if time.time() >= next_kill:
                victim = VICTIMS[len(kills) % len(VICTIMS)]
                rec = {"crawler-child": kill_child, "supervisor": kill_supervisor,
                       "dispatcher": kill_dispatcher}[victim]()
                if rec:
                    kills.append(rec)
                next_kill = max(next_kill + args.every, time.time())
            time.sleep(0.2)

        # The crawl's end: the dispatcher finishes, tells the supervisors to stop.
        deadline = time.time() + args.finish_timeout
        while finished_on_its_own is None and time.time() < deadline:
            watch()
            rc = dispatcher.poll()
            if rc is not None:
                finished_on_its_own = rc
                log(f"the dispatcher exited with status {rc}")
            time.sleep(0.2)
        if finished_on_its_own is None:
            log(f"the dispatcher did not finish within {args.finish_timeout:.0f} s: stopping it (SIGTERM)")
            dispatcher.popen.terminate()
            try:
                dispatcher.popen.wait(timeout=60)
            except subprocess.TimeoutExpired:
                dispatcher.popen.kill()
        sup_deadline = time.time() + 60
        while any(s.poll() is None for s in sups) and time.time() < sup_deadline:
            time.sleep(0.2)
        for s in sups:
            if s.poll() is None:
                log(f"{s.name} pid {s.pid} still running 60 s after the dispatcher's end: SIGTERM")
                s.popen.terminate()
        for s in sups:
            try:
                s.popen.wait(timeout=40)
            except subprocess.TimeoutExpired:
                s.popen.kill()
                s.popen.wait()
        wall = time.time() - started
        web.send_signal(signal.SIGTERM)
        web.wait(timeout=60)

        summary = None
        try:
            summary = json.load(open(summary_file))
        except (OSError, ValueError):
            pass
        crawl_finished = finished_on_its_own == 0
        st = query_pages(uri, db, crawl)
        reqs = bench.read_request_log(request_log, started) or {}
        fetched = histogram(request_log) or {}
        expected = info["expected_pages"]
        stored = st.get("documents") or 0
        exp_by_status = {str(k): v for k, v in info.get("expected_by_status", {}).items()}
        got_by_status = st.get("by_status", {})
        if exp_by_status and "by_status" in st:
            lost = sum(max(0, n - got_by_status.get(s, 0)) for s, n in exp_by_status.items())
        else:
            lost = max(0, expected - stored)
        stored_twice = st.get("stored_twice", 0)
        page_fetches = fetched.get("page_fetches", 0)
        by_victim = collections.Counter(k["victim"] for k in kills)
        result = {
            "profile": args.profile,
            "web": {k: info["spec"][k] for k in ("hosts", "pages_per_host", "page_bytes", "links_per_page")},
            "setup": {"supervisors": args.supervisors, "children": args.children, "every_secs": args.every,
                      "max_kills": args.kills, "seed": seed, "dispatcher_flags": dispatcher_flags},
            "store": kind,
            "crawl_finished": crawl_finished,
            "expected_pages": expected,
            "stored_pages": stored,
            "lost": lost,
            "lost_by_count": expected - stored,
            "stored_twice": stored_twice,
            "by_status": {"expected": exp_by_status, "stored": got_by_status},
            "page_fetches": page_fetches,
            "robots_fetches": reqs.get("robots"),
            "distinct_urls_fetched": fetched.get("distinct_urls"),
            "fetches_per_stored_page": round(page_fetches / stored, 4) if stored else None,
            "redirect_fetches": fetched.get("redirects"),
            "fetches_per_stored_page_less_redirects":
                round((page_fetches - fetched.get("redirects", 0)) / stored, 4) if stored else None,
            "fetches_per_url_histogram": fetched.get("histogram"),
            "most_fetched": fetched.get("most_fetched"),
            "request_status": reqs.get("status"),
            "kills": kills,
            "kills_by_victim": dict(by_victim),
            "dispatcher_starts": dispatcher.starts,
            "supervisor_starts": {s.name: s.starts for s in sups},
            "wall_secs": round(wall, 2),
            "exit_codes": {"dispatcher": finished_on_its_own,
                           **{s.name: s.popen.returncode for s in sups}},
            "summary": {k: summary.get(k) for k in ("finish_reason", "frontier_left", "fetched", "elapsed_secs")}
            if summary else None,
            "frontier_states": st.get("frontier_states"),
        }
        if "error" in st:
            result["store_error"] = st["error"]
        human(result)
        print(json.dumps(result, indent=2))
        ok = crawl_finished and lost == 0 and stored_twice == 0 and "error" not in st
        return 0 if ok else 1
    finally:
        procs = ([web] if web else []) + (dispatcher.all if dispatcher else []) + [p for s in sups for p in s.all]
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=40)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        subprocess.call([os.path.join(ROOT, "scripts", "store.sh"), "stop", store_dir])
        if args.keep or not ok:
            print(f"work directory: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def human(r):
    e = lambda *a: print(*a, file=sys.stderr)
    w = r["web"]
    e(f"== chaos: {r['profile']} web, {w['hosts']} hosts x {w['pages_per_host']} pages, {r['expected_pages']} URLs to "
      f"store; store {r['store']}; {r['setup']['supervisors']} supervisors x {r['setup']['children']} children; "
      f"a kill every {r['setup']['every_secs']} s")
    e(f"kills: {len(r['kills'])} (" + ", ".join(f"{k} {v}" for k, v in r["kills_by_victim"].items())
      + f"); dispatcher started {r['dispatcher_starts']} times")
    e(f"crawl {'finished' if r['crawl_finished'] else 'DID NOT FINISH'} in {r['wall_secs']} s; summary: {r['summary']}")
    e(f"stored {r['stored_pages']} of {r['expected_pages']} pages: lost {r['lost']}, stored twice {r['stored_twice']}")
    h = r["fetches_per_url_histogram"] or {}
    e(f"page fetches {r['page_fetches']} (+ {r['robots_fetches']} robots.txt): {r['fetches_per_stored_page']} per stored "
      f"page ({r['fetches_per_stored_page_less_redirects']} less the {r['redirect_fetches']} redirects); "
      f"URLs fetched once {h.get('1')}, twice {h.get('2')}, 3+ times {h.get('3+')}")


if __name__ == "__main__":
    sys.exit(main())
