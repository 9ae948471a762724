// Command gputest runs Loom's test binaries on a machine without Go (the GPU
// machine): scripts/gpu-test builds every package's test binary, a manifest
// (tests.txt) and this runner into .gpu/; there,
//
//	.gpu/gputest -logs DIR [flags] [-- test binary flags]
//
// runs every binary in its package directory (as go test does) with
// -test.v, several packages at once, all sharing one kernel cache
// (LOOM_CACHE_DIR), and reads each test's result and output from the
// verbose output (its === framing lines and --- result lines). It prints a
// line per package as
// it finishes, with the output of every failed test, then a table of
// passed/failed/skipped tests per package, the number skipped on its own
// line and last exactly "N passed, N failed". The exit status is 1 if any
// test or any binary failed.
//
// Counts are of leaf tests (tests without subtests), plus a parent test that
// failed on its own (none of its subtests failed), plus one failure for a
// binary that exited with an error no test accounts for (a timeout, a panic
// outside a test, a failing TestMain).
//
// DIR gets, per package, NAME.log (the raw output, written as the tests
// run) and summary.txt at the end.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Manifest is the file in the binaries' folder that lists the packages: one
// line each, "DIR BINARY [SHARD …]" (DIR relative to the repository root),
// in the order they are started. A package with shards runs as one process
// per shard, its -test.run pattern, and one more for every test no shard
// takes (-test.skip of them all), each process a row of its own, so that a
// package longer than the others (tests: over 300 s on an H200 alone)
// does not hold the whole run. Where the binaries' flags pick tests with
// -test.run the package runs whole; their -test.skip applies to every
// shard.
const Manifest = "tests.txt"

// cacheEnv is exec/rocm's kernel cache directory variable (CacheDirEnv).
const cacheEnv = "LOOM_CACHE_DIR"

// libDirs are appended to the binaries' LD_LIBRARY_PATH: where CUDA's and
// ROCm's libraries live on the GPU machines.
var libDirs = []string{"/usr/local/cuda/lib64", "/opt/rocm/lib"}

func main() {
	self, _ := os.Executable()
	dir := flag.String("dir", filepath.Dir(self), "folder of the test binaries and "+Manifest)
	root := flag.String("root", "", "repository root (default: the parent of -dir)")
	logs := flag.String("logs", "", "folder for the logs (default: DIR/logs under -dir)")
	jobs := flag.Int("j", 4, "test binaries run at once")
	timeout := flag.Duration("timeout", 8*time.Minute, "time limit of each test binary (its -test.timeout; killed 1m later)")
	cache := flag.String("cache", "", "kernel cache shared by every binary (default: a fresh temporary folder, removed at the end)")
	pkgRE := flag.String("pkg", "", "run only the packages whose folder matches this regular expression")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: gputest [flags] [-- test binary flags, e.g. -test.run TestGPU -test.short]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	r := &runner{dir: *dir, root: *root, logs: *logs, timeout: *timeout, args: flag.Args()}
	if r.root == "" {
		r.root = filepath.Dir(r.dir)
	}
	if r.logs == "" {
		r.logs = filepath.Join(r.dir, "logs")
	}
	pkgs, err := readManifest(filepath.Join(r.dir, Manifest))
	if err == nil && *pkgRE != "" {
		var re *regexp.Regexp
		if re, err = regexp.Compile(*pkgRE); err == nil {
			pkgs = slices.DeleteFunc(pkgs, func(p *pkgRun) bool { return !re.MatchString(p.dir) })
		}
	}
	if err == nil {
		err = os.MkdirAll(r.logs, 0o755)
	}
	if err == nil {
		err = r.setCache(*cache)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gputest:", err)
		os.Exit(2)
	}
	pkgs = r.shard(pkgs)
	failed := r.runAll(pkgs, max(1, *jobs))
	r.cleanup()
	if failed {
		os.Exit(1)
	}
}

// runner holds the settings of one run.
type runner struct {
	dir, root, logs string
	timeout         time.Duration
	args            []string // passed to every binary
	cacheDir        string
	removeCache     bool

	outMu sync.Mutex // one package's report at a time on stdout
}

// pkgRun is one package's binary (or one shard of it) and, once run, its
// results.
type pkgRun struct {
	dir, bin string
	shards   []string // the manifest's -test.run patterns (shard splits them)
	shard    string   // this process's part: a pattern, "rest", or "" (all)
	flags    []string // its own test flags (-test.run or -test.skip)

	elapsed                 time.Duration
	exitErr                 error
	results                 map[string]string   // test → pass, fail or skip
	output                  map[string][]string // test → output lines (while running; kept for failures and skips)
	pkgOut                  []string            // the last lines not attributed to a test
	passed, failed, skipped int
	failures                []string // tests counted as failed, in order
	skips                   []string // top-level tests skipped, with why
}

func readManifest(path string) ([]*pkgRun, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w (build it with scripts/gpu-test)", err)
	}
	var pkgs []*pkgRun
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("%s: bad line %q", path, line)
		}
		pkgs = append(pkgs, &pkgRun{dir: f[0], bin: f[1], shards: f[2:]})
	}
	return pkgs, nil
}

// shard replaces each package with shards by one run per shard and one
// for the rest, unless the binaries' flags pick tests themselves.
func (r *runner) shard(pkgs []*pkgRun) []*pkgRun {
	var skips []string // the binaries' own -test.skip, kept in the rest's
	for i, a := range r.args {
		n, v, eq := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case n == "test.run":
			return pkgs
		case n == "test.skip" && eq:
			skips = append(skips, v)
		case n == "test.skip" && i+1 < len(r.args):
			skips = append(skips, r.args[i+1])
		}
	}
	var out []*pkgRun
	for _, p := range pkgs {
		if len(p.shards) == 0 {
			out = append(out, p)
			continue
		}
		for _, pat := range p.shards {
			out = append(out, &pkgRun{dir: p.dir, bin: p.bin, shard: pat, flags: []string{"-test.run", pat}})
		}
		// The testing package takes a pattern's top-level | as
		// alternatives, each then split at its slashes: A/x|A/y skips
		// A's subtests x and y and nothing else.
		out = append(out, &pkgRun{dir: p.dir, bin: p.bin, shard: "rest", flags: []string{"-test.skip", strings.Join(append(slices.Clone(skips), p.shards...), "|")}})
	}
	return out
}

// name is the run's label: its folder, and its shard where it has one.
func (p *pkgRun) name() string {
	if p.shard == "" {
		return p.dir
	}
	return p.dir + " [" + p.shard + "]"
}

// notWord matches what a shard's log name replaces with _.
var notWord = regexp.MustCompile(`[^A-Za-z0-9]+`)

// logName is the run's log file.
func (p *pkgRun) logName() string {
	n := strings.TrimSuffix(p.bin, ".test")
	if p.shard != "" {
		n += "." + notWord.ReplaceAllString(p.shard, "_")
	}
	return n + ".log"
}

func (r *runner) setCache(dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "loom-kernels-")
		if err != nil {
			return err
		}
		r.cacheDir, r.removeCache = d, true
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	r.cacheDir = abs
	return os.MkdirAll(abs, 0o755)
}

func (r *runner) cleanup() {
	if r.removeCache {
		os.RemoveAll(r.cacheDir)
	}
}

// runAll runs the packages, jobs at a time, in manifest order, and prints
// the summary. It reports whether anything failed.
func (r *runner) runAll(pkgs []*pkgRun, jobs int) bool {
	fmt.Printf("gputest: %d test processes (packages and their shards), %d at a time, timeout %v each, kernel cache %s, logs in %s\n",
		len(pkgs), jobs, r.timeout, r.cacheDir, r.logs)
	start := time.Now()
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	for _, p := range pkgs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r.run(p)
			r.report(p)
		}()
	}
	wg.Wait()
	return r.summary(pkgs, time.Since(start))
}

// run runs p's binary and collects its results.
func (r *runner) run(p *pkgRun) {
	p.results, p.output = map[string]string{}, map[string][]string{}
	t0 := time.Now()
	defer func() { p.elapsed = time.Since(t0) }()
	raw, err := os.Create(filepath.Join(r.logs, p.logName()))
	if err != nil {
		p.exitErr = err
		return
	}
	defer raw.Close()

	ctx, cancel := context.WithTimeout(context.Background(), r.timeout+time.Minute)
	defer cancel()
	// A shard's own flags come last, so that they win over the same flag
	// among the binaries' (its -test.skip holds theirs).
	args := append(append([]string{"-test.v", "-test.timeout=" + r.timeout.String()}, r.args...), p.flags...)
	cmd := exec.CommandContext(ctx, filepath.Join(r.dir, p.bin), args...)
	cmd.Dir = filepath.Join(r.root, p.dir)
	cmd.Env = append(os.Environ(), cacheEnv+"="+r.cacheDir, "LD_LIBRARY_PATH="+libPath())
	// Past the hard limit: a goroutine dump (SIGQUIT), then a kill.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 30 * time.Second
	// One pipe for stdout and stderr, so that lines stay in order.
	pr, pw, err := os.Pipe()
	if err != nil {
		p.exitErr = err
		return
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	parse := &verboseParser{p: p}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		p.exitErr = err
		return
	}
	io.Copy(io.MultiWriter(raw, parse), pr)
	pr.Close()
	p.exitErr = cmd.Wait()
	parse.flush()
	p.count()
}

// libPath is LD_LIBRARY_PATH with libDirs appended.
func libPath() string {
	dirs := filepath.SplitList(os.Getenv("LD_LIBRARY_PATH"))
	for _, d := range libDirs {
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return strings.Join(slices.DeleteFunc(dirs, func(d string) bool { return d == "" }), string(filepath.ListSeparator))
}

// Limits on what is kept in memory for the report (the logs have it all).
const (
	keepLines    = 200 // output lines kept per test
	keepPkgLines = 100 // lines not attributed to a test
)

// The lines of `go test -v` output the parser reads: a framing line names
// the test whose output follows (=== RUN, and with parallel tests PAUSE,
// CONT and NAME); a result line ends a test, the lines indented under it
// being its output too.
var (
	frameLine  = regexp.MustCompile(`^=== (RUN|PAUSE|CONT|NAME)\s+(\S+)`)
	resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(`)
)

// verboseParser reads a test binary's -test.v output and records in p each
// test's result and output (output lines go to the test last framed).
type verboseParser struct {
	p   *pkgRun
	cur string
	buf []byte
}

func (v *verboseParser) Write(b []byte) (int, error) {
	v.buf = append(v.buf, b...)
	for {
		i := bytes.IndexByte(v.buf, '\n')
		if i < 0 {
			break
		}
		v.line(string(v.buf[:i]))
		v.buf = v.buf[i+1:]
	}
	return len(b), nil
}

func (v *verboseParser) flush() {
	if len(v.buf) > 0 {
		v.line(string(v.buf))
		v.buf = nil
	}
}

func (v *verboseParser) line(l string) {
	p := v.p
	if m := frameLine.FindStringSubmatch(l); m != nil {
		v.cur = m[2]
		return
	}
	if m := resultLine.FindStringSubmatch(l); m != nil {
		action, name := strings.ToLower(m[1]), m[2]
		p.results[name] = action
		if action == "pass" {
			delete(p.output, name)
		}
		v.cur = name
		return
	}
	switch {
	case l == "PASS" || l == "FAIL" || strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "FAIL\t"):
		v.cur = ""
		fallthrough
	case v.cur == "":
		p.pkgOut = appendCapped(p.pkgOut, l+"\n", keepPkgLines)
	default:
		p.output[v.cur] = appendCapped(p.output[v.cur], l+"\n", keepLines)
	}
}

// appendCapped appends line to lines, dropping the oldest past n.
func appendCapped(lines []string, line string, n int) []string {
	lines = append(lines, line)
	if len(lines) > n {
		lines = slices.Delete(lines, 0, len(lines)-n)
	}
	return lines
}

// count turns p.results into the counts: leaf tests, parents that failed on
// their own, and the binary's own failure.
func (p *pkgRun) count() {
	names := make([]string, 0, len(p.results))
	for n := range p.results {
		names = append(names, n)
	}
	slices.Sort(names)
	// In sorted order a test's subtests follow it ("T" < "T/a"), though
	// other tests may come between ("T" < "T-x" < "T/a"): look for any
	// name with the prefix.
	hasSub := func(n string, failedOnly bool) bool {
		pre := n + "/"
		i, _ := slices.BinarySearch(names, pre)
		for ; i < len(names) && strings.HasPrefix(names[i], pre); i++ {
			if !failedOnly || p.results[names[i]] == "fail" {
				return true
			}
		}
		return false
	}
	anyFailed := false
	for _, n := range names {
		res := p.results[n]
		anyFailed = anyFailed || res == "fail"
		if hasSub(n, false) && (res != "fail" || hasSub(n, true)) {
			continue
		}
		switch res {
		case "pass":
			p.passed++
		case "fail":
			p.failed++
			p.failures = append(p.failures, n)
		case "skip":
			p.skipped++
			if !strings.Contains(n, "/") {
				p.skips = append(p.skips, n+": "+skipReason(p.output[n]))
			}
		}
	}
	if p.exitErr != nil && !anyFailed {
		p.failed++
		p.failures = append(p.failures, "")
	}
}

// skipReason is the first line of a skipped test's own output, shortened
// to maxReason bytes.
func skipReason(out []string) string {
	for _, l := range out {
		if s := strings.TrimSpace(l); s != "" && !isFraming(s) {
			if len(s) > maxReason {
				s = strings.ToValidUTF8(s[:maxReason], "") + "…"
			}
			return s
		}
	}
	return "(no message)"
}

// maxReason bounds a skip message in the report (the logs have it whole).
const maxReason = 160

func isFraming(s string) bool {
	return strings.HasPrefix(s, "=== ") || strings.HasPrefix(s, "--- ")
}

// maxReported bounds the failed tests whose output is printed per package.
const maxReported = 20

// report prints p's line, its top-level skips and its failures.
func (r *runner) report(p *pkgRun) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	status := "ok  "
	if p.failed > 0 {
		status = "FAIL"
	}
	fmt.Printf("%s %-30s %7.1fs  %d passed, %d failed, %d skipped\n", status, p.name(), p.elapsed.Seconds(), p.passed, p.failed, p.skipped)
	for _, s := range p.skips {
		fmt.Printf("     skip %s\n", s)
	}
	for i, n := range p.failures {
		if i == maxReported {
			fmt.Printf("     … %d more failed tests: see %s\n", len(p.failures)-i, filepath.Join(r.logs, p.logName()))
			break
		}
		if n == "" {
			fmt.Printf("     %s: %v; its last output:\n", p.bin, p.exitErr)
			printIndented(p.pkgOut)
			continue
		}
		fmt.Printf("     --- FAIL: %s\n", n)
		printIndented(p.output[n])
	}
}

func printIndented(lines []string) {
	for _, l := range lines {
		if s := strings.TrimRight(l, "\n"); s != "" && !isFraming(strings.TrimSpace(s)) {
			fmt.Printf("        %s\n", s)
		}
	}
}

// summary prints (and writes to summary.txt) the table and the totals; it
// reports whether anything failed.
func (r *runner) summary(pkgs []*pkgRun, elapsed time.Duration) bool {
	var b strings.Builder
	w := bufio.NewWriter(&b)
	fmt.Fprintf(w, "\n%-30s %7s %7s %7s %9s\n", "package", "passed", "failed", "skipped", "time")
	var passed, failed, skipped int
	for _, p := range pkgs {
		fmt.Fprintf(w, "%-30s %7d %7d %7d %8.1fs\n", p.name(), p.passed, p.failed, p.skipped, p.elapsed.Seconds())
		passed += p.passed
		failed += p.failed
		skipped += p.skipped
	}
	fmt.Fprintf(w, "total time %.1fs; logs in %s\n", elapsed.Seconds(), r.logs)
	fmt.Fprintf(w, "%d skipped\n", skipped)
	fmt.Fprintf(w, "%d passed, %d failed\n", passed, failed)
	w.Flush()
	fmt.Print(b.String())
	if err := os.WriteFile(filepath.Join(r.logs, "summary.txt"), []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gputest:", err)
	}
	return failed > 0
}
