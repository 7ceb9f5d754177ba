package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// writeMarkdown renders the results as the tables of results.md (and of
// bench/run's standard output).
func writeMarkdown(w io.Writer, res Results) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# ubik benchmark results\n\n%s; %s, %s cores, %s; %s\n", res.Date, res.Machine["cpu"], res.Machine["cores"], res.Machine["memory"], res.Machine["go"])
	keys := make([]string, 0, len(res.Meta))
	for k := range res.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "- %s: %s\n", k, res.Meta[k])
	}
	if st := ubikStatus(res.Rows); st != "" {
		fmt.Fprintf(&b, "\n**ubik: %s**\n", st)
	}

	var main, scal []Row
	for _, r := range res.Rows {
		if r.Set == "scaling" {
			scal = append(scal, r)
		} else {
			main = append(main, r)
		}
	}
	if len(main) > 0 {
		b.WriteString("\n## Queries (medians; CPU = user + sys of the whole process; ratio = ubik / DuckDB, paired per repeat)\n\n")
		b.WriteString("| query | events | ubik wall s | ubik events/s | ubik CPU µs/event | ubik peak RSS MB | ubik emit p50 / p99 ms | ubik state B per live (group, window) | DuckDB wall s | DuckDB events/s | DuckDB CPU µs/event | DuckDB peak RSS MB | result rows | CPU ratio ubik/DuckDB | wall ratio ubik/DuckDB |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range main {
			u, d := r.Ubik, r.DuckDB
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				r.Query, humanCount(r.Events),
				cellOr(u, fix(u.WallSeconds, 2)), cellOr(u, rate(u.EventsPerSecond)), cellOr(u, fix(u.CPUMicrosPerEvent, 2)), cellOr(u, fix(u.PeakRSSMB, 0)),
				cellOr(u, latency(u)), cellOr(u, stat(u, "state_bytes_per_group", 0)),
				cellOr(d, fix(d.WallSeconds, 2)), cellOr(d, rate(d.EventsPerSecond)), cellOr(d, fix(d.CPUMicrosPerEvent, 2)), cellOr(d, fix(d.PeakRSSMB, 0)),
				cellOr(d, stat(d, "rows", 0)), ratio(r.CPURatio), ratio(r.WallRatio))
		}
	}
	if rows := withBaseline(res.Rows); len(rows) > 0 {
		b.WriteString("\n## ubik against the baseline binary (medians; ratios paired per repeat: the same repeats as above)\n\n")
		b.WriteString("| set | query | events | groups | ubik CPU µs/event | baseline CPU µs/event | CPU ratio ubik/baseline | ubik wall s | baseline wall s | wall ratio ubik/baseline | ubik peak RSS MB | baseline peak RSS MB | CPU ratio baseline/DuckDB |\n")
		b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range rows {
			u, o := r.Ubik, *r.Baseline
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				r.Set, r.Query, humanCount(r.Events), humanCount(r.Groups),
				cellOr(u, fix(u.CPUMicrosPerEvent, 2)), cellOr(o, fix(o.CPUMicrosPerEvent, 2)), ratio(r.BaselineCPURatio),
				cellOr(u, fix(u.WallSeconds, 2)), cellOr(o, fix(o.WallSeconds, 2)), ratio(r.BaselineWallRatio),
				cellOr(u, fix(u.PeakRSSMB, 0)), cellOr(o, fix(o.PeakRSSMB, 0)), ratio(r.BaselineDuckDBCPURatio))
		}
	}
	if len(scal) > 0 {
		fmt.Fprintf(&b, "\n## Scaling: query %s as the number of distinct groups grows\n\n", scal[0].Query)
		b.WriteString("| groups | dist | events | ubik events/s | ubik CPU µs/event | ubik peak RSS MB | ubik live groups (peak) | ubik state B per live group | DuckDB events/s | DuckDB CPU µs/event | DuckDB peak RSS MB | result rows | CPU ratio ubik/DuckDB |\n")
		b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range scal {
			u, d := r.Ubik, r.DuckDB
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				humanCount(r.Groups), r.Dist, humanCount(r.Events),
				cellOr(u, rate(u.EventsPerSecond)), cellOr(u, fix(u.CPUMicrosPerEvent, 2)), cellOr(u, fix(u.PeakRSSMB, 0)),
				cellOr(u, stat(u, "live_groups_peak", 0)), cellOr(u, stat(u, "state_bytes_per_group", 0)),
				cellOr(d, rate(d.EventsPerSecond)), cellOr(d, fix(d.CPUMicrosPerEvent, 2)), cellOr(d, fix(d.PeakRSSMB, 0)),
				cellOr(d, stat(d, "rows", 0)), ratio(r.CPURatio))
		}
		if res.Scaling != nil {
			fmt.Fprintf(&b, "\nScaling verdict: %s.\n", res.Scaling.Verdict)
		}
	}
	if len(res.Targets) > 0 {
		b.WriteString("\n## Targets\n\n| target | want | measured | met |\n|---|---|---:|---|\n")
		for _, t := range res.Targets {
			v := fix(t.Value, 2)
			if t.Unit == "events/s" {
				v = rate(t.Value)
			}
			fmt.Fprintf(&b, "| %s | %s %s | %s %s | %s |\n", t.Name, t.Want, t.Unit, v, t.Unit, yesNo(t.Pass))
		}
	}
	var notes []string
	someRan := ubikStatus(res.Rows) == "" // else the one reason is said above
	for _, r := range res.Rows {
		engines := []struct {
			name string
			m    Measure
		}{{"ubik", r.Ubik}, {"DuckDB", r.DuckDB}}
		if r.Baseline != nil {
			engines = append(engines, struct {
				name string
				m    Measure
			}{"baseline", *r.Baseline})
		}
		for _, e := range engines {
			prefix := fmt.Sprintf("%s %s %s events, %s groups: ", e.name, r.Query, humanCount(r.Events), humanCount(r.Groups))
			if strings.HasPrefix(e.m.Status, "failed") || (someRan && strings.HasPrefix(e.m.Status, "not built")) {
				notes = append(notes, prefix+e.m.Status)
			}
			for _, n := range e.m.Notes {
				notes = append(notes, prefix+n)
			}
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// withBaseline returns the rows a baseline binary ran in.
func withBaseline(rows []Row) []Row {
	var out []Row
	for _, r := range rows {
		if r.Baseline != nil {
			out = append(out, r)
		}
	}
	return out
}

// ubikStatus is a one-line reason when ubik ran nowhere.
func ubikStatus(rows []Row) string {
	for _, r := range rows {
		if r.Ubik.Status == "ok" {
			return ""
		}
	}
	for _, r := range rows {
		if r.Ubik.Status != "" {
			return r.Ubik.Status
		}
	}
	return ""
}

func cellOr(m Measure, s string) string {
	switch {
	case m.Status == "ok":
		return s
	case strings.HasPrefix(m.Status, "failed"):
		return "failed"
	case strings.HasPrefix(m.Status, "not run"):
		return "not run"
	}
	return "not built"
}

func fix(v float64, prec int) string {
	if math.IsNaN(v) || v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func rate(v float64) string {
	switch {
	case math.IsNaN(v) || v == 0:
		return "—"
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func stat(m Measure, name string, prec int) string {
	v, ok := m.Stats[name]
	if !ok {
		return "—"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func latency(m Measure) string {
	p50, ok50 := m.Stats["emit_latency_p50_ms"]
	p99, ok99 := m.Stats["emit_latency_p99_ms"]
	if !ok50 || !ok99 {
		return "—"
	}
	return fmt.Sprintf("%.1f / %.1f", p50, p99)
}

func ratio(r *float64) string {
	if r == nil {
		return "—"
	}
	return fmt.Sprintf("%.2f", *r)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}
