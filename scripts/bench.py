#!/usr/bin/env python3
"""Crawl benchmark: crawls a synthetic web with politeness delay 0 and prints
pages/s, crawler CPU per 1,000 pages (dispatcher + supervisors + children; the
store server counted separately), peak RSS per process type and the store used.

    scripts/bench.sh [--hosts 50] [--pages-per-host 400] [--supervisors 2] [--children 2]

CPU: the dispatcher's and supervisors' own rusage from wait4() (a supervisor's
includes the children it reaped), so the total is exact; the split between
supervisor and child processes and peak RSS come from sampling /proc every
100 ms.
"""
import argparse, json, os, socket, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release")
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


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


def children_of(parents):
    """Pids whose parent is in `parents` (scans /proc: no procps needed)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid in parents:
            found.append(int(entry))
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--pages-per-host", type=int, default=400)
    ap.add_argument("--supervisors", type=int, default=2)
    ap.add_argument("--children", type=int, default=2)
    ap.add_argument("--timing-log", action="store_true", help="also write timing logs (to measure their cost)")
    ap.add_argument("--dispatcher-arg", action="append", default=[])
    ap.add_argument("--supervisor-arg", action="append", default=[])
    ap.add_argument("--web-arg", action="append", default=[], help="extra synthweb flag (e.g. --web-arg=--page-bytes=18000)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (timing logs) and print it")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="crawler-bench-")
    store_dir = os.path.join(work, "store")
    uri = subprocess.check_output([os.path.join(ROOT, "scripts", "store.sh"), "start", store_dir], text=True).strip()
    kind = open(os.path.join(store_dir, "kind")).read().strip()
    store_pid = int(open(os.path.join(store_dir, "pid")).read())
    procs = []
    try:
        seeds, hosts = os.path.join(work, "seeds.txt"), os.path.join(work, "hosts")
        web = subprocess.Popen(
            [os.path.join(BIN, "synthweb"), "--hosts", str(args.hosts), "--pages-per-host", str(args.pages_per_host),
             "--write-seeds", seeds, "--write-hosts", hosts] + args.web_arg,
            stdout=subprocess.PIPE, text=True)
        procs.append(web)
        print(web.stdout.readline().strip(), file=sys.stderr)
        endpoint = f"tcp://127.0.0.1:{free_port()}"
        common = ["--mongo-uri", uri]
        if args.timing_log:
            common += ["--timing-log", os.path.join(work, "logs") + "/"]
        summary_file = os.path.join(work, "summary.json")
        started = time.time()
        dispatcher = subprocess.Popen(
            [os.path.join(BIN, "dispatcher"), "--bind", endpoint, "--seeds", seeds, "--min-delay-ms", "0",
             "--min-supervisors", str(args.supervisors), "--summary-file", summary_file, "--progress-secs", "5"]
            + common + args.dispatcher_arg, stdout=subprocess.DEVNULL)
        sups = [subprocess.Popen(
            [os.path.join(BIN, "supervisor"), "--dispatcher", endpoint, "--id", f"sup{i}",
             "--children", str(args.children), "--hosts-file", hosts] + common + args.supervisor_arg) for i in range(args.supervisors)]
        procs += [dispatcher] + sups

        peak = {}  # role -> max VmHWM KiB
        cpu_by_pid = {}  # pid -> (role, cpu)
        store_cpu0 = proc_sample(store_pid)[1]
        store_cpu = store_cpu0
        rusage = {}
        live = {p.pid: p for p in [dispatcher] + sups}
        while live:
            pids = list(live)
            pids += children_of(set(pids))
            for pid in pids:
                s = proc_sample(pid)
                if s:
                    comm, cpu, hwm = s
                    peak[comm] = max(peak.get(comm, 0), hwm)
                    cpu_by_pid[pid] = (comm, cpu)
            s = proc_sample(store_pid)
            if s:
                store_cpu = s[1]
            for pid in list(live):
                res = os.wait4(pid, os.WNOHANG)
                if res[0] == pid:
                    rusage[pid] = (res[1], res[2])
                    del live[pid]
            time.sleep(0.1)
        wall = time.time() - started
        summary = json.load(open(summary_file))
        pages = summary["fetched"]
        exact_cpu = sum(r.ru_utime + r.ru_stime for _, r in rusage.values())
        by_role = {}
        for comm, cpu in cpu_by_pid.values():
            by_role[comm] = by_role.get(comm, 0.0) + cpu
        codes = [os.waitstatus_to_exitcode(st) for st, _ in rusage.values()]
        result = {
            "store": kind,
            "pages": pages,
            "wall_secs": round(wall, 2),
            "pages_per_sec": round(pages / wall, 1),
            "crawler_cpu_secs": round(exact_cpu, 2),
            "crawler_cpu_ms_per_page": round(exact_cpu * 1000 / max(pages, 1), 4),
            "crawler_cpu_secs_per_1000_pages": round(exact_cpu * 1000 / max(pages, 1), 3),
            "sampled_cpu_secs_by_process_type": {k: round(v, 2) for k, v in by_role.items()},
            "store_cpu_secs": round(store_cpu - store_cpu0, 2),
            "store_cpu_ms_per_page": round((store_cpu - store_cpu0) * 1000 / max(pages, 1), 4),
            "peak_rss_mib_by_process_type": {k: round(v / 1024, 1) for k, v in peak.items()},
            "exit_codes": codes,
            "timing_log": args.timing_log,
        }
        print(json.dumps(result, indent=2))
        return 0 if all(c == 0 for c in codes) else 1
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


if __name__ == "__main__":
    sys.exit(main())
