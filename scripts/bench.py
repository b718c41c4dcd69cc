#!/usr/bin/env python3
"""Crawl benchmark: crawls a synthetic web served by synthweb with one
dispatcher and N supervisors x M children, and prints where the time and the
CPU go. A short human summary goes to stderr, the JSON result to stdout.

    scripts/bench.sh                              # realistic profile, the issue's set-up
    scripts/bench.sh --hosts 60 --pages-per-host 100
    scripts/bench.sh --profile small              # the old benchmark: 50 x 400 pages of 4,000 bytes

Profiles (synthweb --profile, see tests/src/web/model.rs `Profile`):
- realistic (default): 200 hosts x 250 pages of 5-32 KiB (mean 18 KiB), 10-40
  links a page (80% same host), about 3% 404s and 1% redirects, robots.txt
  everywhere, 3 hosts with Crawl-delay: 0.5. Dispatcher flags: --min-delay-ms 0
  --max-domain-connections 8 --child-concurrency 32.
- small: 50 hosts x 400 pages of 4,000 bytes, 10 random links, a quarter 404s
  and a quarter redirects. Dispatcher flags: --min-delay-ms 0 only.

Figures (the JSON keys are in brackets):
- pages: responses the dispatcher counted (its summary's `fetched`);
  [pages_per_sec] = pages / wall time from the dispatcher's start to the exit
  of every crawler process.
- [no_delay]: the pages of the hosts WITHOUT a Crawl-delay (from the store:
  `pages` documents by `domain`, the Crawl-delay hosts listed by synthweb's
  --write-info), and their rate = that count / (last `fetched_at` among them
  - dispatcher start). The Crawl-delay hosts take ~0.5 s a page and would
  otherwise decide the wall time.
- [main_phase]: the per-second page rate comes from the `fetched_at` of the
  stored pages; the main phase runs from the first to the last second whose
  rate is at least half the peak second's. Its machine CPU use comes from
  /proc/stat, sampled every second (busy = everything but idle and iowait,
  over the samples that bracket the phase), in % of all cores and in cores.
- [cpu_ms_per_page]: CPU (user + system) per page for each role: dispatcher,
  supervisor, crawler-child (all processes of a role summed), the store
  server and synthweb, sampled from /proc/PID/stat every 0.2 s (a process's
  last <0.2 s before it exits is missed; [crawler_cpu_exact_secs] is the
  exact total of the crawler processes from wait4()).
- [web_server]: what synthweb served (requests/s, MB/s over the wall time and
  in its busiest second, from its --request-log and /proc/PID/io wchar) and
  its CPU share (% of one core, and % of all the CPU the machine used).
- [stored_bytes_per_page]: average BSON size of the `pages` documents, read
  raw by the client (nx-27017's `$bsonSize` counts binary base64'd);
  `body_bytes_per_page` is the average `$binarySize` of the zstd-compressed
  `body` field over the pages that have one.
- [peak_rss_mib]: the largest VmHWM of any process of each role.
- [store]: which store server ran (mongod or nx-27017).
- [tenths]: the hosts without Crawl-delay, their run (dispatcher start to
  their last `fetched_at`) cut into ten equal spans of time, pages/s in
  each, and [last_over_first] = the last tenth's rate over the first's: a
  crawl that slows down as its collections grow shows it here.
- [dispatcher_rss_mib]: the dispatcher's VmRSS every 5 s ([secs, MiB]).
- [store_work]: the store's work per stored page by collection and
  command (commands = round trips, and the documents they carried:
  inserted, update statements, or returned by reads), from the `store work`
  line each crawler process logs as it ends (the driver's command
  monitoring, shared/store/src/work.rs).
- [collections]: each crawl collection's documents, data and index bytes
  (collStats; what the store answers, else the error).
- --node-cpu-quota CORES: each supervisor (a "node": it and its children)
  runs in a cgroup of its own limited to CORES of CPU (cgroup v1
  cpu.cfs_quota_us, or v2 cpu.max), to measure how the rate grows with
  nodes of equal size on one machine: `--supervisors 1`, 2, 4.

Figures are indicative on a loaded machine: compare runs made under the same
load.
"""
import argparse, json, os, random, secrets, shutil, signal, socket, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release")
TICK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1
ROLES = ("dispatcher", "supervisor", "crawler-child")

PROFILES = {
    # Dispatcher flags of the profile (before --dispatcher-arg).
    "realistic": ["--min-delay-ms", "0", "--max-domain-connections", "8", "--child-concurrency", "32"],
    "small": ["--min-delay-ms", "0"],
}
# synthweb counts when not given: the realistic profile's own; the old bench's for small.
DEFAULT_COUNTS = {"realistic": (None, None), "small": (50, 400)}


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port():
    """A port below the kernel's ephemeral range ([20000, low)), bindable now.

    A port the kernel hands out (bind to port 0) comes from the ephemeral
    range, from which every outgoing connection and port-0 server also takes
    ports: by the time the dispatcher binds it, someone else may hold it.
    The kernel never hands out ports below that range by itself (see
    tests/src/harness.rs `free_port`)."""
    low = ephemeral_low()
    start = 20000 if low > 20000 else 1024
    ports = list(range(start, low))
    random.shuffle(ports)
    for port in ports:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        return port
    raise SystemExit("bench.py: no free port below the ephemeral range")


def proc_sample(pid):
    """(comm, cpu seconds, peak rss KiB) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICK
        hwm = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
        return comm, cpu, hwm
    except (OSError, ValueError, IndexError):
        return None


def rss_kib(pid):
    """VmRSS of a live process in KiB, or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


class NodeCgroup:
    """A cgroup limited to `cores` of CPU, for one bench "node" (a supervisor
    and the children it spawns, which inherit it)."""

    def __init__(self, name, cores):
        v2 = "/sys/fs/cgroup/cgroup.controllers"
        period = 100_000
        quota = max(1000, int(cores * period))
        if os.path.exists(v2):
            self.path = os.path.join("/sys/fs/cgroup", name)
            os.makedirs(self.path, exist_ok=True)
            with open(os.path.join(self.path, "cpu.max"), "w") as f:
                f.write(f"{quota} {period}")
        else:
            self.path = os.path.join("/sys/fs/cgroup/cpu", name)
            os.makedirs(self.path, exist_ok=True)
            with open(os.path.join(self.path, "cpu.cfs_period_us"), "w") as f:
                f.write(str(period))
            with open(os.path.join(self.path, "cpu.cfs_quota_us"), "w") as f:
                f.write(str(quota))

    def enter(self):
        """Moves the calling process in (use as a Popen preexec_fn)."""
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def remove(self):
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def tenths(times, t0):
    """Pages/s in each tenth of [t0, last time] (times: seconds since the epoch)."""
    if not times:
        return None
    span = max(times) - t0
    if span <= 0:
        return None
    counts = [0] * 10
    for t in times:
        counts[min(9, int((t - t0) / span * 10))] += 1
    rates = [round(n / (span / 10), 1) for n in counts]
    return {"secs_each": round(span / 10, 2), "pages_per_sec": rates,
            "last_over_first": round(rates[-1] / rates[0], 2) if rates[0] else None}


def progress_tenths(log_path):
    """Pages/s in each tenth of the crawl from the dispatcher's monitor lines
    (pages counted every 5 s): from its start to the first line with the
    final count. For big crawls, whose per-page times are not read back."""
    points = []
    try:
        with open(log_path) as f:
            for line in f:
                if line.startswith("monitor {"):
                    m = json.loads(line[len("monitor "):])
                    points.append((m["elapsed_secs"], m["pages"]))
    except (OSError, ValueError, KeyError):
        return None
    if len(points) < 3:
        return None
    final = points[-1][1]
    end = next(t for t, n in points if n == final)
    if end <= 0:
        return None
    at = lambda x: next((n0 + (n1 - n0) * (x - t0) / (t1 - t0) for (t0, n0), (t1, n1) in zip([(0.0, 0)] + points, points)
                         if t0 <= x <= t1 and t1 > t0), final)
    bounds = [end * i / 10 for i in range(11)]
    rates = [round((at(b) - at(a)) / (end / 10), 1) for a, b in zip(bounds, bounds[1:])]
    return {"secs_each": round(end / 10, 2), "pages_per_sec": rates, "from": "dispatcher monitor lines (all hosts)",
            "last_over_first": round(rates[-1] / rates[0], 2) if rates[0] else None}


def wchar(pid):
    """Bytes the process has written (sockets included), or None."""
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def cpu_times():
    """(total, idle) jiffies of the whole machine from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields[:8]), idle


def parents():
    """{pid: parent pid} of every process (scans /proc: no procps needed)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            found[int(entry)] = int(stat[stat.rindex(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return found


def children_of(pids):
    """Pids whose parent is in `pids`."""
    return [pid for pid, ppid in parents().items() if ppid in pids]


# Run with the store's Python (pymongo): prints a JSON object of store figures.
STORE_QUERY = r"""
import json, sys
import pymongo
uri, db_name = sys.argv[1], sys.argv[2]
db = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000)[db_name]
# The default crawl's pages (collections are named after the crawl id).
pages = db["crawl__pages"]
out = {"documents": pages.estimated_document_count()}
# Big crawls: sizes from a sample, and no per-page times (reading a million
# pages back through nx-27017 did not finish).
BIG = 300_000
sample = {} if out["documents"] <= BIG else {"limit": 50_000}
# The documents' size as BSON on the wire: what mongod stores (before its
# block compression). nx-27017's $bsonSize counts binary fields base64'd
# (an 18 KB page's 4.8 KB body as 6.4 KB), so it is not used.
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
raw = db.get_collection(pages.name, codec_options=CodecOptions(document_class=RawBSONDocument))
sizes = [len(d.raw) for d in raw.find({}, **sample)]
out["bson_bytes"] = sum(sizes) * out["documents"] / max(len(sizes), 1)
out["method"] = "client-side BSON size" + (f" of {len(sizes)} pages" if sample else "")
try:
    if sample:
        raise RuntimeError("not summed over a big collection")
    agg = list(pages.aggregate([{"$match": {"body": {"$exists": True}}},
        {"$group": {"_id": None, "n": {"$sum": 1}, "body": {"$sum": {"$binarySize": "$body"}},
                    "raw": {"$sum": "$bytes"}}}]))
    if agg:
        out["with_body"], out["body_bytes"], out["raw_bytes"] = agg[0]["n"], agg[0]["body"], agg[0]["raw"]
except Exception as e:
    out["body_error"] = str(e)
colls = {}
for kind in ("pages", "segments", "outcomes", "progress", "seeds", "body_dicts"):
    name = "crawl__" + kind
    try:
        c = db.command("collStats", name)
        colls[kind] = {k: c.get(k) for k in ("count", "size", "storageSize", "totalIndexSize", "avgObjSize")}
    except Exception as e:
        colls[kind] = {"count": db[name].estimated_document_count(), "error": str(e)[:200]}
out["collections"] = colls
times = []
for d in pages.find({}, {"domain": 1, "fetched_at": 1}) if not sample else []:
    at = d.get("fetched_at")
    if hasattr(at, "timestamp"):
        if at.tzinfo is None:
            import datetime
            at = at.replace(tzinfo=datetime.timezone.utc)
        times.append([d.get("domain", ""), at.timestamp()])
out["fetched"] = times
print(json.dumps(out))
"""


def store_python():
    venv = os.environ.get("CRAWLER_STORE_VENV", os.path.join(ROOT, ".venv-store"))
    for py in (os.path.join(venv, "bin", "python"), sys.executable):
        if os.path.exists(py) and subprocess.call([py, "-c", "import pymongo"], stderr=subprocess.DEVNULL) == 0:
            return py
    return None


def query_store(uri, db):
    py = store_python()
    if py is None:
        return {"error": "no Python with pymongo (.venv-store is made by scripts/store.sh install)"}
    r = subprocess.run([py, "-c", STORE_QUERY, uri, db], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-500:]}
    return json.loads(r.stdout)


def role_cpu(cpu_by_pid):
    """{role: CPU seconds so far} from {pid: (role, cpu seconds)}."""
    out = {}
    for role, cpu in cpu_by_pid.values():
        out[role] = out.get(role, 0.0) + cpu
    return out


def main_phase(times, t0, samples):
    """Per-second rates from `times` (seconds since the epoch), the main
    phase (first..last second at >= 50% of the peak second) and the
    machine's CPU use over it from the /proc/stat `samples`."""
    if not times:
        return None
    buckets = {}
    for t in times:
        s = int(t - t0)
        buckets[s] = buckets.get(s, 0) + 1
    peak = max(buckets.values())
    busy = [s for s, n in buckets.items() if n >= peak / 2]
    first, last = min(busy), max(busy)
    pages = sum(n for s, n in buckets.items() if first <= s <= last)
    secs = last - first + 1
    # /proc/stat samples bracketing [t0 + first, t0 + last + 1].
    lo = [x for x in samples if x[0] <= t0 + first]
    hi = [x for x in samples if x[0] >= t0 + last + 1]
    a = lo[-1] if lo else samples[0]
    b = hi[0] if hi else samples[-1]
    dt, di = b[1] - a[1], b[2] - a[2]
    busy_share = (1 - di / dt) if dt > 0 else 0.0
    span = max(b[0] - a[0], 1e-9)
    roles = {r: round((b[3].get(r, 0.0) - a[3].get(r, 0.0)) / span, 2) for r in ROLES + ("store", "synthweb")}
    web_share = None
    if dt > di:
        web_share = round((b[3].get("synthweb", 0.0) - a[3].get("synthweb", 0.0)) * TICK / (dt - di) * 100, 1)
    return {
        "definition": "first..last second whose page rate (stored fetched_at) >= 50% of the peak second",
        "start_secs": first,
        "end_secs": last + 1,
        "secs": secs,
        "pages": pages,
        "pages_per_sec": round(pages / secs, 1),
        "peak_pages_per_sec": peak,
        "machine_cpu_percent": round(busy_share * 100, 1),
        "machine_cpu_cores": round(busy_share * NCPU, 2),
        "cores_by_role": roles,
        "cores_of_bench_processes": round(sum(roles.values()), 2),
        "cpu_ms_per_page": {r: round(c * span * 1000 / pages, 3) for r, c in roles.items()},
        "synthweb_share_of_machine_cpu_percent": web_share,
        "cpu_sampled_secs": round(b[0] - a[0], 1),
    }


def read_request_log(path, t0):
    if not os.path.exists(path):
        return None
    n, robots, per_sec, status = 0, 0, {}, {}
    with open(path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            n += 1
            robots += r["path"] == "/robots.txt"
            s = int(r["at_ms"] / 1000 - t0)
            per_sec[s] = per_sec.get(s, 0) + 1
            status[str(r["status"])] = status.get(str(r["status"]), 0) + 1
    return {"requests": n, "robots": robots, "peak_per_sec": max(per_sec.values(), default=0), "status": status}


def start_store(work, keep):
    """Starts a store server in WORK/store (scripts/store.sh; a kept run
    keeps its data, to export or query afterwards with `scripts/store.sh
    start WORK/store --persist`): (uri, kind, store_dir)."""
    store_dir = os.path.join(work, "store")
    persist = ["--persist"] if keep else []
    uri = subprocess.check_output([os.path.join(ROOT, "scripts", "store.sh"), "start", store_dir] + persist,
                                  text=True).strip()
    kind = open(os.path.join(store_dir, "kind")).read().strip()
    return uri, kind, store_dir


def start_web(args, work, hosts, pages_per_host):
    """Starts synthweb for `args.profile` (and `args.web_arg`) with its
    seeds, hosts, info and request log in WORK: (process, paths, info), the
    paths a dict with keys seeds, hosts, info, request_log."""
    paths = {k: os.path.join(work, f) for k, f in
             (("seeds", "seeds.txt"), ("hosts", "hosts"), ("info", "web.json"), ("request_log", "requests.jsonl"))}
    cmd = [os.path.join(BIN, "synthweb"), "--profile", args.profile, "--write-seeds", paths["seeds"],
           "--write-hosts", paths["hosts"], "--write-info", paths["info"], "--request-log", paths["request_log"]]
    if hosts is not None:
        cmd += ["--hosts", str(hosts)]
    if pages_per_host is not None:
        cmd += ["--pages-per-host", str(pages_per_host)]
    web = subprocess.Popen(cmd + args.web_arg, stdout=subprocess.PIPE, text=True)
    print(web.stdout.readline().strip(), file=sys.stderr)
    return web, paths, json.load(open(paths["info"]))


def store_work(log_paths, pages):
    """The store's work per stored page, by collection and command: the
    `store work {json}` line every crawler process logs as it ends (from
    the driver's command monitoring, shared/store/src/work.rs), added up.
    A process killed before its end (none in a bench) is missing."""
    total, processes = {}, 0
    for path in log_paths:
        try:
            lines = open(path, errors="replace").read().splitlines()
        except OSError:
            continue
        for line in lines:
            at = line.find("store work {")
            if at < 0:
                continue
            try:
                work = json.loads(line[at + len("store work "):])["work"]
            except (ValueError, KeyError):
                continue
            processes += 1
            for key, w in work.items():
                t = total.setdefault(key, {"commands": 0, "documents": 0, "ms": 0})
                for k in t:
                    t[k] += w.get(k, 0)
    if not total:
        return None
    per = lambda n: round(n / max(pages, 1), 3)
    cells = {k: {"commands": v["commands"], "documents": v["documents"], "ms": v["ms"],
                 "commands_per_page": per(v["commands"]), "documents_per_page": per(v["documents"])}
             for k, v in sorted(total.items()) if not k.startswith("none.")}
    writes = [v for k, v in total.items() if k.split(".")[1] in ("insert", "update", "delete")]
    return {
        "processes": processes,
        "per_collection_command": cells,
        "commands_per_page": per(sum(v["commands"] for k, v in total.items() if not k.startswith("none."))),
        "write_commands_per_page": per(sum(v["commands"] for v in writes)),
        "written_documents_per_page": per(sum(v["documents"] for v in writes)),
        "how": "sum of the `store work` lines of every crawler process (driver command monitoring); per stored page",
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", choices=sorted(PROFILES), default="realistic")
    ap.add_argument("--hosts", type=int, help="default: the profile's (realistic 200, small 50)")
    ap.add_argument("--pages-per-host", type=int, help="default: the profile's (realistic 250, small 400)")
    ap.add_argument("--supervisors", type=int, default=2)
    ap.add_argument("--children", type=int, default=2)
    ap.add_argument("--timing-log", action="store_true", help="also write timing logs (to measure their cost)")
    ap.add_argument("--dispatcher-arg", action="append", default=[], help="extra dispatcher flag (after the profile's)")
    ap.add_argument("--supervisor-arg", action="append", default=[])
    ap.add_argument("--web-arg", action="append", default=[], help="extra synthweb flag (e.g. --web-arg=--page-bytes=8000)")
    ap.add_argument("--crawler-bin-dir", default=BIN,
                    help="where dispatcher, supervisor and crawler-child are (e.g. another commit's build, to compare); synthweb always comes from this tree")
    ap.add_argument("--node-cpu-quota", type=float, metavar="CORES",
                    help="run each supervisor and its children in a cgroup limited to CORES of CPU (needs root)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, request log, the store's data) and print it")
    args = ap.parse_args()

    hosts, pages_per_host = DEFAULT_COUNTS[args.profile]
    hosts = args.hosts if args.hosts is not None else hosts
    pages_per_host = args.pages_per_host if args.pages_per_host is not None else pages_per_host
    work = tempfile.mkdtemp(prefix="crawler-bench-")
    uri, kind, store_dir = start_store(work, args.keep)
    store_pid = int(open(os.path.join(store_dir, "pid")).read())
    db = os.environ.get("CRAWLER_DB", "crawler")
    procs, ok, cgroups = [], False, []
    try:
        web, paths, info = start_web(args, work, hosts, pages_per_host)
        procs.append(web)
        seeds, hosts_file, request_log = paths["seeds"], paths["hosts"], paths["request_log"]
        delay_hosts = set(info["crawl_delay_hosts"])
        endpoint = f"tcp://127.0.0.1:{free_port()}"
        common = ["--mongo-uri", uri]
        # A fresh cluster secret per run, in the environment (never on a
        # command line; binaries from before the secret just ignore it).
        crawler_env = dict(os.environ, CRAWLER_CLUSTER_SECRET=secrets.token_hex(32))
        if args.timing_log:
            common += ["--timing-log", os.path.join(work, "logs") + "/"]
        summary_file = os.path.join(work, "summary.json")
        dispatcher_flags = PROFILES[args.profile] + args.dispatcher_arg
        web_cpu0 = proc_sample(web.pid)[1]
        web_w0 = wchar(web.pid)
        store_cpu0 = {}
        for pid in [store_pid] + children_of({store_pid}):
            s = proc_sample(pid)
            if s:
                store_cpu0[pid] = s[1]
        bench_cpu0 = sum(os.times()[:2])
        samples = [(time.time(),) + cpu_times() + ({}, web_w0)]
        started = time.time()
        dispatcher = subprocess.Popen(
            [os.path.join(args.crawler_bin_dir, "dispatcher"), "--bind", endpoint, "--seeds", seeds,
             "--min-supervisors", str(args.supervisors), "--summary-file", summary_file, "--progress-secs", "5"]
            + common + dispatcher_flags,
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "dispatcher.log"), "w"), env=crawler_env)
        if args.node_cpu_quota:
            cgroups = [NodeCgroup(f"crawler-bench-{os.getpid()}-node{i}", args.node_cpu_quota)
                       for i in range(args.supervisors)]
        sups = [subprocess.Popen(
            [os.path.join(args.crawler_bin_dir, "supervisor"), "--dispatcher", endpoint, "--id", f"sup{i}",
             "--children", str(args.children), "--hosts-file", hosts_file] + common + args.supervisor_arg,
            stderr=open(os.path.join(work, f"supervisor{i}.log"), "w"), env=crawler_env,
            preexec_fn=cgroups[i].enter if cgroups else None) for i in range(args.supervisors)]
        procs += [dispatcher] + sups

        peak = {}  # role -> max VmHWM KiB
        cpu_by_pid = {}  # pid -> (role, cpu seconds)
        rusage = {}
        live = {p.pid: p for p in [dispatcher] + sups}
        tracked, store_pids, next_scan, next_stat = [], [store_pid], 0.0, started + 1
        dispatcher_rss, next_rss = [], started
        web_w1 = web_w0
        while live:
            now = time.time()
            if now >= next_scan:
                pp = parents()
                tracked = list(live) + [pid for pid, ppid in pp.items() if ppid in live]
                store_pids = [store_pid] + [pid for pid, ppid in pp.items() if ppid == store_pid]
                next_scan = now + 1
            if now >= next_rss:
                kib = rss_kib(dispatcher.pid)
                if kib is not None:
                    dispatcher_rss.append([round(now - started, 1), round(kib / 1024, 1)])
                next_rss += 5
            if now >= next_stat:
                samples.append((now,) + cpu_times() + (role_cpu(cpu_by_pid), web_w1))
                next_stat += 1
            for pid in tracked:
                s = proc_sample(pid)
                if s and s[0] in ROLES:
                    peak[s[0]] = max(peak.get(s[0], 0), s[2])
                    cpu_by_pid[pid] = (s[0], s[1])
            for pid in store_pids:
                s = proc_sample(pid)
                if s:
                    peak["store"] = max(peak.get("store", 0), s[2])
                    cpu_by_pid[("store", pid)] = ("store", s[1] - store_cpu0.get(pid, 0))
            s = proc_sample(web.pid)
            if s:
                peak["synthweb"] = max(peak.get("synthweb", 0), s[2])
                cpu_by_pid[("web", web.pid)] = ("synthweb", s[1] - web_cpu0)
                web_w1 = wchar(web.pid) or web_w1
            for pid in list(live):
                res = os.wait4(pid, os.WNOHANG)
                if res[0] == pid:
                    rusage[pid] = (res[1], res[2])
                    del live[pid]
            time.sleep(0.2)
        wall = time.time() - started
        samples.append((time.time(),) + cpu_times() + (role_cpu(cpu_by_pid), web_w1))
        bench_cpu = sum(os.times()[:2]) - bench_cpu0
        web.send_signal(signal.SIGTERM)
        web.wait(timeout=60)

        summary = json.load(open(summary_file))
        pages = summary["fetched"]
        codes = [os.waitstatus_to_exitcode(st) for st, _ in rusage.values()]
        exact_cpu = sum(r.ru_utime + r.ru_stime for _, r in rusage.values())
        by_role = role_cpu(cpu_by_pid)
        machine_busy = (samples[-1][1] - samples[0][1]) - (samples[-1][2] - samples[0][2])
        machine_busy_secs = machine_busy / TICK

        st = query_store(uri, db)
        fetched = st.pop("fetched", [])
        host = lambda domain: domain.split(":")[0]
        nd = [t for d, t in fetched if host(d) not in delay_hosts]
        no_delay = None
        if nd:
            span = max(nd) - started
            no_delay = {
                "hosts": info["spec"]["hosts"] - len(delay_hosts),
                "pages": len(nd),
                "expected_pages": info["expected_pages_without_crawl_delay"],
                "secs_to_last": round(span, 2),
                "pages_per_sec": round(len(nd) / span, 1),
                "how": "store pages documents of the hosts without Crawl-delay; dispatcher start to their last fetched_at",
            }
        docs = st.get("documents") or 0
        stored = {"method": st.get("method"), "documents": docs}
        if docs and "bson_bytes" in st:
            stored["bytes_per_page"] = round(st["bson_bytes"] / docs)
        if st.get("with_body"):
            stored["body_bytes_per_page"] = round(st["body_bytes"] / st["with_body"])
            stored["raw_html_bytes_per_page"] = round(st["raw_bytes"] / st["with_body"])
            stored["pages_with_body"] = st["with_body"]
        if "error" in st or "body_error" in st:
            stored["error"] = st.get("error") or st.get("body_error")

        swork = store_work([os.path.join(work, "dispatcher.log")]
                          + [os.path.join(work, f"supervisor{i}.log") for i in range(args.supervisors)], docs)
        reqs = read_request_log(request_log, started) or {}
        web_cpu = by_role.get("synthweb", 0.0)
        served = (web_w1 - web_w0) if (web_w0 is not None and web_w1 is not None) else None
        rates = [(y[4] - x[4]) / (y[0] - x[0]) for x, y in zip(samples, samples[1:])
                 if x[4] is not None and y[4] is not None and y[0] > x[0]]
        web_server = {
            "requests": reqs.get("requests"),
            "requests_per_sec": round(reqs.get("requests", 0) / wall, 1),
            "peak_requests_per_sec": reqs.get("peak_per_sec"),
            "mb_per_sec": round(served / wall / 1e6, 2) if served is not None else None,
            "peak_mb_per_sec": round(max(rates, default=0) / 1e6, 2),
            "cpu_secs": round(web_cpu, 2),
            "cpu_percent_of_one_core": round(web_cpu / wall * 100, 1),
            "share_of_machine_cpu_used_percent": round(web_cpu / machine_busy_secs * 100, 1) if machine_busy_secs else None,
            "status": reqs.get("status"),
        }
        per_page = lambda secs: round(secs * 1000 / max(pages, 1), 3)
        result = {
            "profile": args.profile,
            "web": {k: info["spec"][k] for k in ("hosts", "pages_per_host", "page_bytes", "links_per_page")}
            | {"crawl_delay_hosts": sorted(delay_hosts), "expected_pages": info["expected_pages"]},
            "setup": {"supervisors": args.supervisors, "children": args.children,
                      "dispatcher_flags": dispatcher_flags, "cpus": NCPU},
            "store": kind,
            "pages": pages,
            "stored_pages": docs,
            "wall_secs": round(wall, 2),
            "pages_per_sec": round(pages / wall, 1),
            "no_delay": no_delay,
            "main_phase": main_phase([t for _, t in fetched], started, samples),
            "machine_cpu_percent_whole_run": round(machine_busy / max(samples[-1][1] - samples[0][1], 1) * 100, 1),
            "cpu_ms_per_page": {role: per_page(by_role.get(role, 0.0)) for role in ROLES + ("store", "synthweb")},
            "cpu_secs": {role: round(by_role.get(role, 0.0), 2) for role in ROLES + ("store", "synthweb")}
            | {"bench.py": round(bench_cpu, 2)},
            "crawler_cpu_exact_secs": round(exact_cpu, 2),
            "web_server": web_server,
            "stored_bytes_per_page": stored,
            "peak_rss_mib": {k: round(v / 1024, 1) for k, v in sorted(peak.items())},
            "tenths": tenths(nd, started) or progress_tenths(os.path.join(work, "dispatcher.log")),
            "dispatcher_rss_mib": dispatcher_rss,
            "collections": st.get("collections"),
            "store_work": swork,
            "node_cpu_quota": args.node_cpu_quota,
            "exit_codes": codes,
            "timing_log": args.timing_log,
        }
        human(result)
        print(json.dumps(result, indent=2))
        ok = all(c == 0 for c in codes)
        return 0 if ok else 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.call([os.path.join(ROOT, "scripts", "store.sh"), "stop", store_dir])
        for c in cgroups:
            c.remove()
        if args.keep or not ok:
            print(f"work directory: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def human(r):
    e = lambda *a: print(*a, file=sys.stderr)
    w = r["web"]
    e(f"== {r['profile']} web: {w['hosts']} hosts x {w['pages_per_host']} pages, {w['expected_pages']} URLs to store; "
      f"store {r['store']}; {r['setup']['supervisors']} supervisors x {r['setup']['children']} children")
    e(f"pages {r['pages']} in {r['wall_secs']} s: {r['pages_per_sec']} pages/s overall")
    nd = r["no_delay"]
    if nd:
        e(f"hosts without Crawl-delay: {nd['pages']} pages in {nd['secs_to_last']} s: {nd['pages_per_sec']} pages/s")
    mp = r["main_phase"]
    if mp:
        e(f"main phase {mp['start_secs']}-{mp['end_secs']} s: {mp['pages_per_sec']} pages/s (peak {mp['peak_pages_per_sec']}), "
          f"machine CPU {mp['machine_cpu_percent']}% ({mp['machine_cpu_cores']} of {r['setup']['cpus']} cores, "
          f"{mp['cores_of_bench_processes']} by the bench's processes: "
          + ", ".join(f"{k} {v}" for k, v in mp["cores_by_role"].items()) + ")")
    e("CPU ms/page, whole run: " + ", ".join(f"{k} {v}" for k, v in r["cpu_ms_per_page"].items()))
    if mp:
        e("CPU ms/page, main phase: " + ", ".join(f"{k} {v}" for k, v in mp["cpu_ms_per_page"].items()))
    ws = r["web_server"]
    e(f"synthweb: {ws['requests_per_sec']} req/s ({ws['peak_requests_per_sec']} in its busiest second), "
      f"{ws['mb_per_sec']} MB/s ({ws['peak_mb_per_sec']} peak), {ws['cpu_percent_of_one_core']}% of a core, "
      f"{ws['share_of_machine_cpu_used_percent']}% of the CPU the machine used"
      + (f" ({mp['synthweb_share_of_machine_cpu_percent']}% in the main phase)" if mp else ""))
    sw = r.get("store_work")
    if sw:
        e(f"store work per stored page: {sw['commands_per_page']} commands ({sw['write_commands_per_page']} writes "
          f"carrying {sw['written_documents_per_page']} documents): "
          + ", ".join(f"{k} {v['commands_per_page']} cmd/{v['documents_per_page']} docs"
                      for k, v in sw["per_collection_command"].items()
                      if v["commands_per_page"] >= 0.001 or v["documents_per_page"] >= 0.001))
    sb = r["stored_bytes_per_page"]
    e(f"stored: {sb.get('bytes_per_page')} B/page ({sb.get('method')}), body {sb.get('body_bytes_per_page')} B "
      f"compressed from {sb.get('raw_html_bytes_per_page')} B")
    e("peak RSS MiB: " + ", ".join(f"{k} {v}" for k, v in r["peak_rss_mib"].items()))
    t = r.get("tenths")
    if t:
        e(f"tenths of the run ({t['secs_each']} s each), pages/s without Crawl-delay: "
          + " ".join(str(x) for x in t["pages_per_sec"]) + f"; last/first {t['last_over_first']}")
    if r.get("node_cpu_quota"):
        e(f"each node (supervisor + children) limited to {r['node_cpu_quota']} cores")


if __name__ == "__main__":
    sys.exit(main())
