// The Go interop driver: runs named scenarios with Apache RocketMQ's Go client v2 (pinned in
// go.mod) against one name server, all at once in this process. The topics GO_<scenario>_<run id>
// (4 queues) must exist before it starts: the Go push consumer refuses to Start() on a topic with
// no route, so the test pre-creates them.
//
// Usage: godriver --namesrv HOST:PORT --scenarios a,b,c --run-id ID [--timeout-s S]
//
// stdout carries only JSON lines: one {"event":"result","scenario","ok","detail","ms"} per
// scenario (in the order asked), then {"event":"summary","passed","failed"}. The client's own
// log goes to stderr. Exit 0 when every scenario passed, 1 otherwise, 2 on a usage error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

type result struct {
	Event    string `json:"event"`
	Scenario string `json:"scenario"`
	OK       bool   `json:"ok"`
	Detail   string `json:"detail"`
	Ms       int64  `json:"ms"`
}

// run is what every scenario gets: the name server and names unique to this run and scenario.
type run struct {
	namesrv  string
	runID    string
	scenario string
}

func (r run) topic() string           { return "GO_" + r.scenario + "_" + r.runID }
func (r run) name(kind string) string { return kind + "_GO_" + r.scenario + "_" + r.runID }

func main() {
	namesrv := flag.String("namesrv", "", "name server HOST:PORT")
	scenarios := flag.String("scenarios", "", "comma-separated scenario names")
	runID := flag.String("run-id", "", "suffix of every topic and group")
	timeoutS := flag.Int("timeout-s", 90, "whole-run timeout in seconds")
	flag.Parse()
	if *namesrv == "" || *scenarios == "" || *runID == "" {
		fmt.Fprintln(os.Stderr, "usage: godriver --namesrv ADDR --scenarios a,b --run-id ID [--timeout-s S]")
		os.Exit(2)
	}
	rlog.SetLogLevel("error")
	names := strings.Split(*scenarios, ",")
	for _, n := range names {
		if _, ok := all[n]; !ok {
			fmt.Fprintf(os.Stderr, "unknown scenario %q\n", n)
			os.Exit(2)
		}
	}
	results := make([]chan result, len(names))
	for i, n := range names {
		ch := make(chan result, 1)
		results[i] = ch
		go func(n string) {
			start := time.Now()
			res := result{Event: "result", Scenario: n}
			defer func() {
				if p := recover(); p != nil {
					res.OK, res.Detail = false, fmt.Sprintf("panic: %v", p)
				}
				res.Ms = time.Since(start).Milliseconds()
				ch <- res
			}()
			detail, err := all[n](run{namesrv: *namesrv, runID: *runID, scenario: n})
			if err != nil {
				res.Detail = err.Error()
			} else {
				res.OK, res.Detail = true, detail
			}
		}(n)
	}
	deadline := time.After(time.Duration(*timeoutS) * time.Second)
	passed, failed := 0, 0
	out := json.NewEncoder(os.Stdout)
	for i, ch := range results {
		var res result
		select {
		case res = <-ch:
		case <-deadline:
			res = result{Event: "result", Scenario: names[i], Detail: fmt.Sprintf("driver timeout after %d s", *timeoutS)}
			deadline = closed()
		}
		if res.OK {
			passed++
		} else {
			failed++
		}
		_ = out.Encode(res)
	}
	_ = out.Encode(map[string]any{"event": "summary", "passed": passed, "failed": failed})
	if failed > 0 {
		os.Exit(1)
	}
	os.Exit(0)
}

func closed() <-chan time.Time {
	ch := make(chan time.Time)
	close(ch)
	return ch
}

// waitFor polls cond every 50 ms until it holds, or fails naming what after the timeout.
func waitFor(what func() string, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

var bg = context.Background()

var (
	allMu sync.Mutex
	all   = map[string]func(run) (string, error){}
)

func register(name string, f func(run) (string, error)) {
	allMu.Lock()
	defer allMu.Unlock()
	all[name] = f
}
