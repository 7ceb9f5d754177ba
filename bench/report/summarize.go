package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// runsHeader is the first line bench/run writes to runs.tsv.
const runsHeader = "set\tquery\tworkload\tevents\tgroups\tdist\trep\tengine\tstatus\ttime_file\tstats_file\tlog_file"

// Run is one line of runs.tsv: one process run of one engine, or the note
// that an engine was skipped.
type Run struct {
	Set      string // "main" or "scaling"
	Query    string
	Workload string // merchant or bids
	Events   int64
	Groups   int64
	Dist     string
	Rep      int
	Engine   string // ubik, baseline (a second ubik binary, bench/run --baseline) or duckdb
	// Status is "ran", or "skipped: REASON" (the engine is not built, say).
	Status    string
	TimeFile  string
	StatsFile string
	LogFile   string
}

func readRuns(r io.Reader) ([]Run, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var runs []Run
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			if text != runsHeader {
				return nil, fmt.Errorf("%w: line 1: header %q, want %q", ErrRuns, text, runsHeader)
			}
			continue
		}
		if text == "" {
			continue
		}
		f := strings.Split(text, "\t")
		if len(f) != 12 {
			return nil, fmt.Errorf("%w: line %d: %d fields, want 12", ErrRuns, line, len(f))
		}
		r := Run{Set: f[0], Query: f[1], Workload: f[2], Dist: f[5], Engine: f[7], Status: f[8], TimeFile: f[9], StatsFile: f[10], LogFile: f[11]}
		var err error
		if r.Events, err = strconv.ParseInt(f[3], 10, 64); err != nil || r.Events <= 0 {
			return nil, fmt.Errorf("%w: line %d: events %q", ErrRuns, line, f[3])
		}
		if r.Groups, err = strconv.ParseInt(f[4], 10, 64); err != nil || r.Groups <= 0 {
			return nil, fmt.Errorf("%w: line %d: groups %q", ErrRuns, line, f[4])
		}
		if r.Rep, err = strconv.Atoi(f[6]); err != nil {
			return nil, fmt.Errorf("%w: line %d: rep %q", ErrRuns, line, f[6])
		}
		if r.Engine != "ubik" && r.Engine != "baseline" && r.Engine != "duckdb" {
			return nil, fmt.Errorf("%w: line %d: engine %q", ErrRuns, line, r.Engine)
		}
		if r.Status != "ran" && !strings.HasPrefix(r.Status, "skipped") {
			return nil, fmt.Errorf("%w: line %d: status %q", ErrRuns, line, r.Status)
		}
		runs = append(runs, r)
	}
	return runs, sc.Err()
}

// Measure is one engine's figures for one (query, size): medians over the
// repeats that succeeded.
type Measure struct {
	// Status is "ok", "not built: ..." or "failed: ...".
	Status             string  `json:"status"`
	Runs               int     `json:"runs"`
	WallSeconds        float64 `json:"wall_seconds,omitempty"`
	CPUSeconds         float64 `json:"cpu_seconds,omitempty"`
	EventsPerSecond    float64 `json:"events_per_second,omitempty"`
	CPUMicrosPerEvent  float64 `json:"cpu_us_per_event,omitempty"`
	EventsPerCPUSecond float64 `json:"events_per_cpu_second,omitempty"`
	PeakRSSMB          float64 `json:"peak_rss_mb,omitempty"`
	// Stats are the medians of the numeric fields of the engine's own
	// summary JSON (ubik's --stats-json, duckref's --stats-json).
	Stats map[string]float64 `json:"stats,omitempty"`
	Notes []string           `json:"notes,omitempty"`
}

// Row is one (set, query, events, groups) with the engines side by side.
type Row struct {
	Set      string  `json:"set"`
	Query    string  `json:"query"`
	Workload string  `json:"workload"`
	Events   int64   `json:"events"`
	Groups   int64   `json:"groups"`
	Dist     string  `json:"dist"`
	Ubik     Measure `json:"ubik"`
	DuckDB   Measure `json:"duckdb"`
	// Baseline is the second ubik binary's figures (bench/run --baseline),
	// nil when none ran.
	Baseline *Measure `json:"baseline,omitempty"`
	// CPURatio is the median over repeats of ubik's CPU per event divided
	// by DuckDB's in the same repeat (runs alternate, so a pair shares the
	// machine's state). Below 1 means ubik used less CPU. WallRatio is the
	// same of the wall times: below 1, ubik's events/s beat DuckDB's.
	CPURatio  *float64 `json:"cpu_ratio_ubik_to_duckdb,omitempty"`
	WallRatio *float64 `json:"wall_ratio_ubik_to_duckdb,omitempty"`
	// BaselineCPURatio and BaselineWallRatio are ubik's over the
	// baseline's, repeat by repeat, and BaselineDuckDBCPURatio the
	// baseline's CPU over DuckDB's.
	BaselineCPURatio       *float64 `json:"cpu_ratio_ubik_to_baseline,omitempty"`
	BaselineWallRatio      *float64 `json:"wall_ratio_ubik_to_baseline,omitempty"`
	BaselineDuckDBCPURatio *float64 `json:"cpu_ratio_baseline_to_duckdb,omitempty"`
}

// Target is one of the targets bench/README.md states, checked against a measured figure.
type Target struct {
	Name  string  `json:"name"`
	Want  string  `json:"want"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Pass  bool    `json:"pass"`
}

// Results is results.json.
type Results struct {
	Date    string            `json:"date"`
	Machine map[string]string `json:"machine"`
	Meta    map[string]string `json:"meta,omitempty"`
	Rows    []Row             `json:"rows"`
	Targets []Target          `json:"targets,omitempty"`
	Scaling *Scaling          `json:"scaling,omitempty"`
}

// Scaling summarizes the scaling set: how the cost per event moves as the
// number of distinct groups grows.
type Scaling struct {
	Query string `json:"query"`
	// MinGroups and MaxGroups are the fewest and the most groups measured.
	MinGroups int64 `json:"min_groups"`
	MaxGroups int64 `json:"max_groups"`
	// UbikGrowth and DuckDBGrowth are the CPU per event at the largest
	// group count divided by that at the smallest; 0 when not measured.
	UbikGrowth   float64 `json:"ubik_cpu_per_event_growth"`
	DuckDBGrowth float64 `json:"duckdb_cpu_per_event_growth"`
	Verdict      string  `json:"verdict"`
}

type rowKey struct {
	set, query string
	events     int64
	groups     int64
	dist       string
}

// summarize reads every run's files and builds the results. Files are read
// relative to base when they are not absolute.
func summarize(runs []Run, base string) (Results, error) {
	res := Results{Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Machine: machine()}
	byKey := map[rowKey][]Run{}
	var order []rowKey
	for _, r := range runs {
		k := rowKey{r.Set, r.Query, r.Events, r.Groups, r.Dist}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}
	for _, k := range order {
		rs := byKey[k]
		row := Row{Set: k.set, Query: k.query, Workload: rs[0].Workload, Events: k.events, Groups: k.groups, Dist: k.dist}
		ubikCPU, duckCPU := map[int]float64{}, map[int]float64{}
		ubikWall, duckWall := map[int]float64{}, map[int]float64{}
		var err error
		row.Ubik, ubikCPU, ubikWall, err = measure(filterEngine(rs, "ubik"), base)
		if err != nil {
			return res, err
		}
		row.DuckDB, duckCPU, duckWall, err = measure(filterEngine(rs, "duckdb"), base)
		if err != nil {
			return res, err
		}
		if ev, ok := readAll(row.Ubik.Stats, row.Events); !ok {
			row.Ubik.Notes = append(row.Ubik.Notes, fmt.Sprintf("read %d of %d events", ev, row.Events))
		}
		for _, f := range []string{"malformed", "late"} {
			if v := row.Ubik.Stats[f]; v > 0 {
				row.Ubik.Notes = append(row.Ubik.Notes, fmt.Sprintf("%s: %d", f, int64(v)))
			}
		}
		row.CPURatio = pairedRatio(ubikCPU, duckCPU)
		row.WallRatio = pairedRatio(ubikWall, duckWall)
		if bs := filterEngine(rs, "baseline"); len(bs) > 0 {
			b, baseCPU, baseWall, err := measure(bs, base)
			if err != nil {
				return res, err
			}
			row.Baseline = &b
			row.BaselineCPURatio = pairedRatio(ubikCPU, baseCPU)
			row.BaselineWallRatio = pairedRatio(ubikWall, baseWall)
			row.BaselineDuckDBCPURatio = pairedRatio(baseCPU, duckCPU)
		}
		res.Rows = append(res.Rows, row)
	}
	res.Scaling = scaling(res.Rows)
	res.Targets = targets(res.Rows, res.Scaling)
	return res, nil
}

func filterEngine(rs []Run, engine string) []Run {
	var out []Run
	for _, r := range rs {
		if r.Engine == engine {
			out = append(out, r)
		}
	}
	return out
}

// measure takes the medians over the successful runs, and returns each
// repeat's CPU per event and wall time for the paired ratios.
func measure(rs []Run, base string) (Measure, map[int]float64, map[int]float64, error) {
	m := Measure{Status: "not run"}
	cpu, wall := map[int]float64{}, map[int]float64{}
	if len(rs) == 0 {
		return m, cpu, wall, nil
	}
	if s := rs[0].Status; strings.HasPrefix(s, "skipped") {
		m.Status = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(s, "skipped"), ":"))
		return m, cpu, wall, nil
	}
	var walls, cpus, rss []float64
	stats := map[string][]float64{}
	var failures []string
	for _, r := range rs {
		if r.Status != "ran" {
			continue
		}
		f, err := os.Open(resolve(base, r.TimeFile))
		if err != nil {
			return m, nil, nil, fmt.Errorf("run %s %s rep %d: %w", r.Engine, r.Query, r.Rep, err)
		}
		u, err := parseTimeV(f)
		f.Close()
		if err != nil {
			return m, nil, nil, fmt.Errorf("run %s %s rep %d: %s: %w", r.Engine, r.Query, r.Rep, r.TimeFile, err)
		}
		if u.ExitStatus != 0 || u.Signal != 0 {
			why := fmt.Sprintf("exit %d", u.ExitStatus)
			if u.Signal != 0 {
				why = fmt.Sprintf("signal %d", u.Signal)
			}
			if len(failures) == 0 {
				why += ": " + firstLine(resolve(base, r.LogFile))
			}
			failures = append(failures, fmt.Sprintf("rep %d %s", r.Rep, why))
			continue
		}
		walls = append(walls, u.WallSeconds)
		cpus = append(cpus, u.CPUSeconds())
		rss = append(rss, float64(u.MaxRSSKB)/1024)
		cpu[r.Rep] = u.CPUSeconds() / float64(r.Events)
		wall[r.Rep] = u.WallSeconds
		if r.StatsFile != "" {
			sm, err := readStats(resolve(base, r.StatsFile))
			if err != nil {
				failures = append(failures, fmt.Sprintf("rep %d: stats: %v", r.Rep, err))
				continue
			}
			for k, v := range sm {
				stats[k] = append(stats[k], v)
			}
		}
	}
	m.Runs = len(walls)
	switch {
	case len(failures) > 0 && m.Runs == 0:
		m.Status = "failed: " + strings.Join(failures, "; ")
	case len(failures) > 0:
		m.Status = "ok"
		m.Notes = append(m.Notes, "some repeats failed: "+strings.Join(failures, "; "))
	default:
		m.Status = "ok"
	}
	if m.Runs == 0 {
		return m, cpu, wall, nil
	}
	events := float64(rs[0].Events)
	m.WallSeconds = median(walls)
	m.CPUSeconds = median(cpus)
	m.PeakRSSMB = median(rss)
	if m.WallSeconds > 0 {
		m.EventsPerSecond = events / m.WallSeconds
	}
	m.CPUMicrosPerEvent = m.CPUSeconds * 1e6 / events
	if m.CPUSeconds > 0 {
		m.EventsPerCPUSecond = events / m.CPUSeconds
	}
	if len(stats) > 0 {
		m.Stats = map[string]float64{}
		for k, vs := range stats {
			m.Stats[k] = median(vs)
		}
	}
	return m, cpu, wall, nil
}

func resolve(base, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(base, p)
}

// readStats returns the numeric top-level fields of a summary JSON object.
func readStats(path string) (map[string]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]float64{}
	for k, v := range obj {
		if f, ok := v.(float64); ok {
			out[k] = f
		}
	}
	// A query of two inputs (a join) counts each: input.NAME.events_read.
	if ins, ok := obj["inputs"].([]any); ok {
		for _, in := range ins {
			m, _ := in.(map[string]any)
			name, _ := m["input"].(string)
			if ev, ok := m["events_read"].(float64); ok && name != "" {
				out["input."+name+".events_read"] = ev
			}
		}
	}
	return out, nil
}

// readAll reports whether ubik read the point's events: events_read, or
// for a query of two inputs (whose events_read is their sum) the input
// the point's events are of.
func readAll(stats map[string]float64, events int64) (int64, bool) {
	ev, ok := stats["events_read"]
	if !ok || int64(ev) == events {
		return int64(ev), true
	}
	for k, v := range stats {
		if strings.HasPrefix(k, "input.") && strings.HasSuffix(k, ".events_read") && int64(v) == events {
			return int64(v), true
		}
	}
	return int64(ev), false
}

func firstLine(path string) string {
	if path == "" {
		return "no log"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	if s == "" {
		return "empty log " + path
	}
	return fmt.Sprintf("%q (log %s)", s, path)
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func pairedRatio(a, b map[int]float64) *float64 {
	var rs []float64
	for rep, x := range a {
		if y, ok := b[rep]; ok && y > 0 {
			rs = append(rs, x/y)
		}
	}
	if len(rs) == 0 {
		return nil
	}
	m := median(rs)
	return &m
}

// The targets bench/README.md states ("Targets"), checked against ubik's
// figures: CPU against DuckDB's over the same file, wall time with the
// cores ubik was given, memory and latency bounds, the Nexmark-style rates,
// the growth from the fewest to the most groups, and, with a baseline, no
// regression of the other queries against it.
const (
	stdCPURatioMax   = 0.6    // std: ubik's CPU per event at most this times DuckDB's
	stdWallRatioMax  = 1.0    // std: ubik's wall at most DuckDB's (events/s at least DuckDB's)
	stdRSSMaxMB      = 100    // std: peak RSS below this, at every size
	q5RateMin        = 1.25e6 // q5: events per CPU-second
	q12RateMin       = 750e3  // q12: events per CPU-second
	scalingGrowthMax = 1.5    // CPU per event at the most groups over the fewest
	// regressionMax bounds ubik's CPU over the baseline's for the other
	// Nexmark queries: same-run pairs on these machines spread by about
	// 10%, so a smaller bound would flag noise.
	regressionMax = 1.10
)

// targets checks the targets against ubik's figures.
func targets(rows []Row, sc *Scaling) []Target {
	var ts []Target
	for _, r := range rows {
		if r.Set != "main" || r.Ubik.Status != "ok" {
			continue
		}
		u := r.Ubik
		size := fmt.Sprintf(" (%s events)", humanCount(r.Events))
		switch r.Query {
		case "std":
			if r.CPURatio != nil {
				ts = append(ts, Target{"std: CPU per event vs DuckDB" + size, fmt.Sprintf("<= %.1f", stdCPURatioMax), *r.CPURatio, "x", *r.CPURatio <= stdCPURatioMax})
			}
			if r.WallRatio != nil {
				ts = append(ts, Target{"std: wall time vs DuckDB (events/s at least DuckDB's)" + size, fmt.Sprintf("<= %.1f", stdWallRatioMax), *r.WallRatio, "x", *r.WallRatio <= stdWallRatioMax})
			}
			ts = append(ts, Target{"std: peak RSS" + size, fmt.Sprintf("< %d", stdRSSMaxMB), u.PeakRSSMB, "MB", u.PeakRSSMB < stdRSSMaxMB})
			if v, ok := u.Stats["state_bytes_per_group"]; ok {
				ts = append(ts, Target{"std: state bytes per live (group, window)" + size, "<= 150", v, "B", v <= 150})
			}
			if v, ok := u.Stats["emit_latency_p99_ms"]; ok {
				ts = append(ts, Target{"std: p99 emission latency" + size, "<= 1010 (interval 1 s + 10 ms)", v, "ms", v <= 1010})
			}
		case "q12":
			ts = append(ts, Target{"q12: events per CPU-second" + size, ">= 750k", u.EventsPerCPUSecond, "events/s", u.EventsPerCPUSecond >= q12RateMin})
		case "q5":
			ts = append(ts, Target{"q5: events per CPU-second" + size, ">= 1.25M", u.EventsPerCPUSecond, "events/s", u.EventsPerCPUSecond >= q5RateMin})
		}
		switch r.Query {
		case "q7", "q11", "q12", "q17":
			if r.BaselineCPURatio != nil {
				ts = append(ts, Target{r.Query + ": CPU per event vs the baseline (no regression)" + size, fmt.Sprintf("<= %.2f", regressionMax), *r.BaselineCPURatio, "x", *r.BaselineCPURatio <= regressionMax})
			}
		}
	}
	if sc != nil && sc.UbikGrowth > 0 {
		ts = append(ts, Target{fmt.Sprintf("scaling: CPU per event at %s groups over %s", humanCount(sc.MaxGroups), humanCount(sc.MinGroups)), fmt.Sprintf("<= %.1f", scalingGrowthMax), sc.UbikGrowth, "x", sc.UbikGrowth <= scalingGrowthMax})
	}
	return ts
}

func scaling(rows []Row) *Scaling {
	var rs []Row
	for _, r := range rows {
		if r.Set == "scaling" {
			rs = append(rs, r)
		}
	}
	if len(rs) < 2 {
		return nil
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Groups < rs[j].Groups })
	lo, hi := rs[0], rs[len(rs)-1]
	s := &Scaling{Query: lo.Query, MinGroups: lo.Groups, MaxGroups: hi.Groups}
	growth := func(a, b Measure) float64 {
		if a.Status != "ok" || b.Status != "ok" || a.CPUMicrosPerEvent <= 0 {
			return 0
		}
		return b.CPUMicrosPerEvent / a.CPUMicrosPerEvent
	}
	s.UbikGrowth = growth(lo.Ubik, hi.Ubik)
	s.DuckDBGrowth = growth(lo.DuckDB, hi.DuckDB)
	from, to := humanCount(lo.Groups), humanCount(hi.Groups)
	switch {
	case s.UbikGrowth == 0:
		s.Verdict = "ubik not measured"
	case s.UbikGrowth <= 1.25:
		s.Verdict = fmt.Sprintf("flat: ubik's CPU per event moves %.2fx from %s to %s groups (within 25%%)", s.UbikGrowth, from, to)
	default:
		s.Verdict = fmt.Sprintf("not flat: ubik's CPU per event grows %.2fx from %s to %s groups", s.UbikGrowth, from, to)
	}
	if s.DuckDBGrowth > 0 {
		s.Verdict += fmt.Sprintf("; DuckDB's grows %.2fx", s.DuckDBGrowth)
	}
	return s
}

// machine describes the host from /proc, for the record.
func machine() map[string]string {
	m := map[string]string{"cores": strconv.Itoa(runtime.NumCPU()), "go": runtime.Version(), "os": runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					if kb, err := strconv.ParseFloat(f[0], 64); err == nil {
						m["memory"] = fmt.Sprintf("%.1f GiB", kb/(1<<20))
					}
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m["kernel"] = strings.TrimSpace(string(b))
	}
	return m
}

func humanCount(n int64) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.FormatInt(n, 10)
}
