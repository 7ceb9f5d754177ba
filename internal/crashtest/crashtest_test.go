package crashtest

import (
	"os/exec"
	"testing"
	"time"
)

func TestKill(t *testing.T) {
	p := Start(t, exec.Command("sleep", "30"))
	if killed, err := p.Kill(); !killed || err != nil {
		t.Fatalf("kill of a running process: killed %v, %v", killed, err)
	}
	p = Start(t, exec.Command("true"))
	<-p.Done()
	if killed, err := p.Kill(); killed || err != nil {
		t.Fatalf("kill of a process that ended cleanly: killed %v, %v", killed, err)
	}
	p = Start(t, exec.Command("false"))
	if killed, err := p.KillAfter(time.Minute); killed || err == nil {
		t.Fatalf("a process that failed before its kill: killed %v, %v", killed, err)
	}
}

func TestStepRun(t *testing.T) {
	given, killed, err := StepRun(exec.Command("sleep", "30"), 3, time.Millisecond)
	if given != 3 || !killed || err != nil {
		t.Fatalf("a long run: %d slices, killed %v, %v", given, killed, err)
	}
	given, killed, err = StepRun(exec.Command("true"), -1, 20*time.Millisecond)
	if given < 1 || killed || err != nil {
		t.Fatalf("a whole run: %d slices, killed %v, %v", given, killed, err)
	}
}
