package metamorphic

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/crashtest"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/kafka"
)

// tools are the built artifacts the outside paths run: the ubik binary,
// libubik.so (-buildmode=c-shared) with the C host linked to it, and the
// Python binding's directory.
type tools struct {
	root    string // repository root
	ubik    string
	lib     string
	capi    string
	python  string
	brokers []string
}

// build compiles the tools into dir. The broker must answer first: an
// unreachable broker fails the test (scripts/services.sh up starts it).
func build(t *testing.T, dir string) *tools {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tl := &tools{root: root, ubik: filepath.Join(dir, "ubik"), lib: filepath.Join(dir, "libubik.so"),
		capi: filepath.Join(dir, "capi_host"), python: filepath.Join(root, "python")}
	tl.brokers = testenv.RequireKafka(t)
	// The two Go builds run side by side (each mostly links).
	errs := make(chan error, 2)
	for _, s := range [][]string{
		{"go", "build", "-o", tl.ubik, "./cmd/ubik"},
		{"go", "build", "-buildmode=c-shared", "-o", tl.lib, "./capi"},
	} {
		go func() {
			cmd := exec.Command(s[0], s[1:]...)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("%s: %v\n%s", strings.Join(s, " "), err, out)
				return
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	steps := [][]string{
		{"gcc", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-O1", "-I" + filepath.Join(root, "capi"),
			filepath.Join(root, "internal/metamorphic/testdata/capi_host.c"), "-L" + dir, "-lubik", "-Wl,-rpath," + dir, "-o", tl.capi},
	}
	for _, s := range steps {
		cmd := exec.Command(s[0], s[1:]...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(s, " "), err, out)
		}
	}
	return tl
}

// caseFiles writes the case's script (its view renamed to name, its
// second input given options) and input into dir.
func caseFiles(t *testing.T, c *Case, dir, name, options string) (sql, input string) {
	t.Helper()
	sql = filepath.Join(dir, name+".sql")
	input = filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(sql, []byte(c.SecondSQL(c.Named(name), options)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(input, bytes.Join(append(c.Lines, nil), []byte("\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return sql, input
}

// secondFiles writes a join case's second input into dir: its rows as
// a file (rows) and each row after its place, AT<TAB>ROW (placed), as
// the C and Python hosts read them. Nil for a case of one input.
func secondFiles(t *testing.T, c *Case, dir string) (rows, placed string) {
	t.Helper()
	if c.Second == "" {
		return "", ""
	}
	rows, placed = filepath.Join(dir, "second.jsonl"), filepath.Join(dir, "second.tsv")
	var p bytes.Buffer
	for j, l := range c.SecondLines {
		fmt.Fprintf(&p, "%d\t%s\n", c.SecondAt[j], l)
	}
	if err := os.WriteFile(rows, bytes.Join(append(c.SecondLines, nil), []byte("\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(placed, p.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return rows, placed
}

// parseHostOutput reads capi_host's and py_host's output: records, then
// the stats line.
func parseHostOutput(path string, out []byte) (*Result, error) {
	res := &Result{Path: path, Duplicates: -1, TableLate: -1}
	var stats map[string]any
	for _, line := range bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n")) {
		if s, ok := bytes.CutPrefix(line, []byte("#stats\t")); ok {
			if err := json.Unmarshal(s, &stats); err != nil {
				return nil, fmt.Errorf("%s: stats %q: %v", path, s, err)
			}
			continue
		}
		f := bytes.SplitN(line, []byte("\t"), 4)
		if len(f) != 4 {
			return nil, fmt.Errorf("%s: output line %q", path, line)
		}
		rev, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: output line %q: %v", path, line, err)
		}
		res.Recs = append(res.Recs, Rec{Key: f[2], Value: f[3], Final: string(f[0]) == "1", Revision: rev})
	}
	if stats == nil {
		return nil, fmt.Errorf("%s: no stats line in the output", path)
	}
	m, ok := stats["malformed"].(float64)
	if !ok {
		return nil, fmt.Errorf("%s: stats without malformed: %v", path, stats)
	}
	res.Malformed = int64(m)
	if d, ok := stats["duplicates"].(float64); ok {
		res.Duplicates = int64(d)
	}
	if tb, ok := stats["table"].(map[string]any); ok {
		if l, ok := tb["late"].(float64); ok {
			res.TableLate = int64(l)
		}
	}
	return res, nil
}

// runCAPI runs c through the C ABI host.
func (tl *tools) runCAPI(t *testing.T, c *Case, dir string, maxPending, batch int) (*Result, error) {
	sql, input := caseFiles(t, c, dir, QueryName, "")
	args := []string{sql, input, QueryName, strconv.Itoa(maxPending), strconv.Itoa(batch)}
	if _, placed := secondFiles(t, c, dir); placed != "" {
		args = append(args, c.Second, placed)
	}
	cmd := exec.Command(tl.capi, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	path := fmt.Sprintf("C ABI max_pending=%d batch=%d", maxPending, batch)
	if err != nil {
		return nil, fmt.Errorf("%s: %v\n%s", path, err, stderr.String())
	}
	return parseHostOutput(path, out)
}

// runPython runs c through python/ubik, pushing bytes or dicts.
func (tl *tools) runPython(t *testing.T, c *Case, dir string, maxPending int, mode string) (*Result, error) {
	sql, input := caseFiles(t, c, dir, QueryName, "")
	args := []string{filepath.Join(tl.root, "internal/metamorphic/testdata/py_host.py"), sql, input, QueryName, strconv.Itoa(maxPending), mode}
	if _, placed := secondFiles(t, c, dir); placed != "" {
		args = append(args, c.Second, placed)
	}
	cmd := exec.Command("python3", args...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+tl.python, "UBIK_LIB="+tl.lib)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	path := fmt.Sprintf("Python %s events max_pending=%d", mode, maxPending)
	if err != nil {
		return nil, fmt.Errorf("%s: %v\n%s", path, err, stderr.String())
	}
	return parseHostOutput(path, out)
}

// parseEnvelopes reads `ubik run --format jsonl` output.
func parseEnvelopes(path string, out []byte) (*Result, error) {
	res := &Result{Path: path, TableLate: -1}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var e struct {
			Key      json.RawMessage `json:"key"`
			Value    json.RawMessage `json:"value"`
			Final    bool            `json:"final"`
			Revision uint64          `json:"revision"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s: output line %q: %v", path, sc.Bytes(), err)
		}
		res.Recs = append(res.Recs, Rec{Key: e.Key, Value: e.Value, Final: e.Final, Revision: e.Revision})
	}
	return res, sc.Err()
}

// summary reads the counters of a --stats-json file.
func summary(path string) (malformed, duplicates int64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, 0, fmt.Errorf("%s: %v", path, err)
	}
	m, ok1 := s["malformed"].(float64)
	d, ok2 := s["duplicates"].(float64)
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("%s has no malformed and duplicates counters: %s", path, b)
	}
	return int64(m), int64(d), nil
}

// runFile runs c with `ubik run --state-dir`: once uninterrupted (to time
// it), then under kills -9 at random points, each time rerunning the same
// command, which resumes from the state directory; the resumed output is
// the path's changelog.
func (tl *tools) runFile(t *testing.T, c *Case, dir string, r *rand.Rand, kills int) (*Result, int, error) {
	rows, _ := secondFiles(t, c, dir)
	sql, input := caseFiles(t, c, dir, QueryName, pathOption(rows))
	out := filepath.Join(dir, "out.jsonl")
	state := filepath.Join(dir, "state")
	stats := filepath.Join(dir, "stats.json")
	args := []string{"run", sql, "--input", input, "--output", out, "--format", "jsonl", "--no-progress",
		"--state-dir", state, "--checkpoint-interval", "2ms", "--stats-json", stats, "--query", QueryName}
	// The uninterrupted run, in slices: how many a whole run takes.
	const slice = 500 * time.Microsecond
	whole, _, err := crashtest.StepRun(exec.Command(tl.ubik, args...), -1, slice)
	if err != nil {
		return nil, 0, fmt.Errorf("file run: %v", err)
	}
	if err := os.RemoveAll(state); err != nil {
		return nil, 0, err
	}
	killed := 0
	for i := 0; i < kills; i++ {
		cmd := exec.Command(tl.ubik, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		_, k, err := crashtest.StepRun(cmd, r.IntN(whole+1), slice)
		if err != nil {
			return nil, killed, fmt.Errorf("file run under kill: %v\n%s", err, stderr.String())
		}
		if !k {
			break // it finished: the resumed changelog is complete
		}
		killed++
	}
	if b, err := exec.Command(tl.ubik, args...).CombinedOutput(); err != nil {
		return nil, killed, fmt.Errorf("file run resumed after %d kills: %v\n%s", killed, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, killed, err
	}
	res, err := parseEnvelopes(fmt.Sprintf("file run --state-dir, %d kills -9", killed), b)
	if err != nil {
		return nil, killed, err
	}
	if res.Malformed, res.Duplicates, err = summary(stats); err != nil {
		return nil, killed, err
	}
	if c.Second != "" && strings.Contains(c.SQL, "CREATE TABLE ") {
		// A temporal join's summary counts the late table rows (the
		// table's versions and counters are in the checkpoint).
		b, err := os.ReadFile(stats)
		if err != nil {
			return nil, killed, err
		}
		var s struct {
			Join *struct {
				TableLate *int64 `json:"table_late"`
			} `json:"join"`
		}
		if err := json.Unmarshal(b, &s); err != nil || s.Join == nil || s.Join.TableLate == nil {
			return nil, killed, fmt.Errorf("%s: no join.table_late in the summary (%v): %s", stats, err, b)
		}
		res.TableLate = *s.Join.TableLate
	}
	return res, killed, nil
}

// pathOption is the option that gives a file run a second input's file
// ("" for none).
func pathOption(rows string) string {
	if rows == "" {
		return ""
	}
	return ", path = '" + rows + "'"
}

// kafkaRun describes one Kafka path.
type kafkaRun struct {
	partitions int
	direct     bool // --partitioned-by-key: the source is keyed by g
}

func (k kafkaRun) String() string {
	mode := "repartitioned"
	if k.direct {
		mode = "direct (keyed by g)"
	}
	return fmt.Sprintf("Kafka %d partitions %s", k.partitions, mode)
}

// viewRef is the reference of one view of a case over Kafka: the view
// alone (Case.ViewCase), unbatched in process.
type viewRef struct {
	name string
	c    *Case
	ref  *Result
	want Finals
}

// viewRefs computes the references of c's views.
func viewRefs(c *Case) ([]viewRef, error) {
	var out []viewRef
	for _, v := range c.Views {
		vc, err := c.ViewCase(v)
		if err != nil {
			return nil, err
		}
		ref, want, err := Reference(vc)
		if err != nil {
			return nil, fmt.Errorf("view %s alone: %w", v, err)
		}
		if len(want) == 0 {
			return nil, fmt.Errorf("view %s alone has no final records", v)
		}
		out = append(out, viewRef{v, vc, ref, want})
	}
	return out, nil
}

// kafkaRefusal is why the Kafka path does not run c's shape: CheckQuery's
// refusal, which `ubik run` must report as it is ("" when Kafka runs it).
func (tl *tools) kafkaRefusal(t *testing.T, c *Case, dir string) (string, error) {
	prog, err := plan.Compile(c.SQL, plan.CompileOptions{})
	if err != nil {
		return "", err
	}
	var q *plan.Query
	for _, pq := range prog.Queries {
		if pq.Name == QueryName {
			q = pq
		}
	}
	if q == nil {
		return "", fmt.Errorf("the script has no query %s", QueryName)
	}
	cerr := kafka.CheckQuery(q)
	if cerr == nil {
		return "", nil
	}
	if !errors.Is(cerr, kafka.ErrUnsupported) {
		return "", fmt.Errorf("CheckQuery: %w, not a refusal of the shape", cerr)
	}
	msg := strings.TrimPrefix(cerr.Error(), kafka.ErrUnsupported.Error()+": ")
	sql, _ := caseFiles(t, c, dir, QueryName, topicOption(QueryName+"_refused_second"))
	b := strings.Join(tl.brokers, ",")
	out, err := exec.Command(tl.ubik, "run", sql, "--source", "kafka://"+b+"/"+QueryName+"_refused_src",
		"--sink", "kafka://"+b+"/"+QueryName+"_refused_sink", "--query", QueryName, "--no-progress").CombinedOutput()
	if err == nil || !strings.Contains(string(out), msg) {
		return "", fmt.Errorf("CheckQuery refuses the shape (%s), but ubik run over Kafka said (%v):\n%s", msg, err, out)
	}
	return msg, nil
}

// topicOption is the option that gives a Kafka run a join's second
// input's topic.
func topicOption(topic string) string { return ", connector = 'kafka', topic = '" + topic + "'" }

// directRefusal checks that ubik run refuses to read an interval join
// case's source partitioned by key (--partitioned-by-key): its right
// stream is routed by the join key with ubik's own key bytes, which no
// producer's partitioning of the left stream is known to match, so the
// harness skips it only because ubik run says so. It returns ubik run's
// words. (A temporal join's table reaches every partition: its direct
// runs run.)
func (tl *tools) directRefusal(t *testing.T, c *Case, dir string) (string, error) {
	sql, _ := caseFiles(t, c, dir, QueryName, topicOption(QueryName+"_refused_second"))
	b := strings.Join(tl.brokers, ",")
	out, err := exec.Command(tl.ubik, "run", sql, "--source", "kafka://"+b+"/"+QueryName+"_refused_src", "--partitioned-by-key",
		"--sink", "kafka://"+b+"/"+QueryName+"_refused_sink", "--query", QueryName, "--no-progress").CombinedOutput()
	const want = "it cannot read the source partitioned by key (drop partitioned_by_key)"
	if err == nil || !strings.Contains(string(out), want) {
		return "", fmt.Errorf("a direct run of a join (--partitioned-by-key): ubik run said (%v), not %q:\n%s", err, want, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// runKafka loads the input into a fresh topic with `ubik produce`, runs
// `ubik run --source kafka://... --sink kafka://...` and kills it with -9
// at a random point, then runs the same command with --until-caught-up,
// which resumes from the committed state and finalizes every window; the
// sink (a delete-policy topic, so no record is compacted away) is read
// back read_committed, and so is each view's own topic (sink-view), whose
// result views holds by view name.
func (tl *tools) runKafka(t *testing.T, c *Case, dir string, r *rand.Rand, kr kafkaRun, want Finals, refs []viewRef) (res *Result, views map[string]*Result, killed bool, err error) {
	name := strings.ReplaceAll(testenv.Name(t, "mm"), "-", "_")
	second := name + "_second"
	sql, input := caseFiles(t, c, dir, name, topicOption(second))
	b := strings.Join(tl.brokers, ",")
	src, sink := name+"_src", name+"_sink"
	cl, err := kgo.NewClient(kgo.SeedBrokers(tl.brokers...))
	if err != nil {
		return nil, nil, false, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	defer func() {
		// Every topic and group of the run is named after the query (the
		// sides of a join of views, a view repartition's stages, ...).
		if ts, err := adm.ListTopics(ctx); err == nil {
			var del []string
			for _, tn := range ts.Names() {
				if strings.HasPrefix(tn, name) {
					del = append(del, tn)
				}
			}
			adm.DeleteTopics(ctx, del...)
		}
		if gs, err := adm.ListGroups(ctx); err == nil {
			var del []string
			for _, g := range gs.Groups() {
				if strings.HasPrefix(g, name) {
					del = append(del, g)
				}
			}
			adm.DeleteGroups(ctx, del...)
		}
	}()
	delPolicy := "delete"
	sinks := []string{sink}
	for _, v := range refs {
		sinks = append(sinks, sink+"-"+v.name) // the CLI's name of a view's topic
	}
	for _, s := range sinks {
		if _, err := adm.CreateTopic(ctx, int32(kr.partitions), -1, map[string]*string{"cleanup.policy": &delPolicy}, s); err != nil {
			return nil, nil, false, fmt.Errorf("creating the sink topic %s: %w", s, err)
		}
	}
	if kr.direct {
		if err := produceByGroup(ctx, cl, adm, src, kr.partitions, c.Lines); err != nil {
			return nil, nil, false, err
		}
	} else {
		produce := []string{"produce", "--to", "kafka://" + b + "/" + src, "--input", input, "--partitions", strconv.Itoa(kr.partitions)}
		if out, err := exec.Command(tl.ubik, produce...).CombinedOutput(); err != nil {
			return nil, nil, false, fmt.Errorf("ubik produce: %v\n%s", err, out)
		}
	}
	if c.Second != "" {
		// The join's second input, keyed by g (a table topic must be
		// keyed by its primary key: a key's versions in one partition),
		// on another partition count than the source's.
		if err := produceByGroup(ctx, cl, adm, second, 1+(kr.partitions+1)%3, c.SecondLines); err != nil {
			return nil, nil, false, fmt.Errorf("the second input's topic: %w", err)
		}
	}
	run := []string{"run", sql, "--source", "kafka://" + b + "/" + src, "--sink", "kafka://" + b + "/" + sink,
		"--query", name, "--instance-id", "a", "--allow-uncompacted-sink", "--log-level", "warn", "--no-progress", "--idle-timeout", "2s"}
	if kr.direct {
		run = append(run, "--partitioned-by-key")
	}
	p, err := crashtest.Launch(exec.Command(tl.ubik, run...))
	if err != nil {
		return nil, nil, false, err
	}
	killed, err = p.KillAfter(100*time.Millisecond + time.Duration(r.Int64N(int64(2900*time.Millisecond))))
	if err != nil {
		return nil, nil, false, fmt.Errorf("%s: the run before the kill: %v\n%s", kr, err, p.Stderr())
	}
	if out, err := exec.Command(tl.ubik, append(run, "--until-caught-up")...).CombinedOutput(); err != nil {
		return nil, nil, killed, fmt.Errorf("%s: the run after the kill: %v\n%s", kr, err, out)
	}
	path := kr.String()
	if killed {
		path += ", kill -9 and restart"
	}
	if res, err = readSink(tl.brokers, sink, c, want); err != nil {
		return nil, nil, killed, err
	}
	res.Path = path
	// The second run's summary counts only what it consumed.
	res.Malformed, res.Duplicates = -1, -1
	views = map[string]*Result{}
	for _, v := range refs {
		vr, err := readSink(tl.brokers, sink+"-"+v.name, v.c, v.want)
		if err != nil {
			return nil, nil, killed, fmt.Errorf("%s: view %s: %w", path, v.name, err)
		}
		vr.Path = path + ", view " + v.name + "'s topic"
		vr.Malformed, vr.Duplicates = -1, -1
		views[v.name] = vr
	}
	return res, views, killed, nil
}

// produceByGroup writes the lines to a new topic keyed by the engine's
// own key of their g cell (a one-column continuous view over the same
// decoder), so the topic is partitioned by the GROUP BY key, as a direct
// run requires. `ubik produce --key-field g` sends a line without a key
// when it holds g = null beside a number spelling its JSON parser does
// not read (-NaN), which would split the NULL group over partitions.
func produceByGroup(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string, partitions int, lines [][]byte) error {
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		return err
	}
	defer eng.Close()
	var key []byte
	q, err := eng.Start(`CREATE SOURCE ev (g VARCHAR) WITH (format = 'jsonl');
CREATE VIEW keys AS SELECT g, count(*) AS c FROM ev GROUP BY g;`, ubik.QueryOptions{OnRecord: func(r changelog.Record) error {
		key = append(key[:0], r.Key...)
		return nil
	}})
	if err != nil {
		return err
	}
	if _, err := adm.CreateTopic(ctx, int32(partitions), -1, nil, topic); err != nil {
		return fmt.Errorf("creating the source topic: %w", err)
	}
	recs := make([]*kgo.Record, len(lines))
	for i, l := range lines {
		key = key[:0]
		if err := q.Push(l); err != nil {
			return fmt.Errorf("the key of line %d %q: %w", i, l, err)
		}
		if len(key) == 0 {
			return fmt.Errorf("line %d %q gave no key", i, l)
		}
		recs[i] = &kgo.Record{Topic: topic, Key: append([]byte(nil), key...), Value: l}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// readSink reads the sink topic read_committed until it holds a final
// record for every expected key (a continuous view: the expected last
// values), then a little longer for anything extra.
func readSink(brokers []string, topic string, c *Case, want Finals) (*Result, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	res := &Result{TableLate: -1}
	got := Finals{}
	complete := func() bool {
		for k, v := range want {
			if g, ok := got[k]; !ok || (!c.Windowed && g != v) {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(60 * time.Second)
	extra := time.Time{}
	for time.Now().Before(deadline) && (extra.IsZero() || time.Now().Before(extra)) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		var derr error
		fs.EachRecord(func(r *kgo.Record) {
			rec, err := changelog.DecodeHeaders(r.Key, r.Value, r.Headers)
			if err != nil && derr == nil {
				derr = fmt.Errorf("sink record at %d/%d: %v", r.Partition, r.Offset, err)
			}
			res.Recs = append(res.Recs, Rec{Key: r.Key, Value: r.Value, Final: rec.Meta.Final, Revision: rec.Meta.Revision})
			if rec.Meta.Final || !c.Windowed {
				got[string(r.Key)] = string(r.Value)
			}
		})
		if derr != nil {
			return nil, derr
		}
		if extra.IsZero() && complete() {
			extra = time.Now().Add(500 * time.Millisecond)
		}
	}
	return res, nil
}
