package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/internal/synth"
)

// fromSS converts an event built with the sessionstore constructors.
func fromSS(ev sessionstore.Event) Event {
	return Event{Kind: string(ev.Kind), Role: string(ev.Role), Payload: ev.Record}
}

// message300 is a user message whose compact record is 300 bytes, as in
// the package's BenchmarkAppend.
func message300() Event {
	pad := 300 - len(sessionstore.UserText("").Record)
	ev := fromSS(sessionstore.UserText(strings.Repeat("a", pad)))
	if len(ev.Payload) != 300 {
		panic(fmt.Sprintf("message300: %d bytes", len(ev.Payload)))
	}
	return ev
}

// toolResult returns a tool result whose output is n bytes of log-like
// text. Outputs with different i differ (a store that deduplicates gets no
// free ride) but share most bytes with base, like successive runs of a
// test suite; base is toolOutput(seed, n).
func toolResult(base string, i int) Event {
	n := strconv.Itoa(i)
	out := n + base[len(n):]
	return fromSS(sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "call_" + n, Output: out}))
}

// toolOutput returns n bytes of log-like text that varies with seed (see
// internal/synth).
func toolOutput(seed uint64, n int) string { return synth.ToolOutput(seed, n) }

// codingSession returns the events of the synthetic coding-agent session
// of the package's BenchmarkDiskRatio: turns of a user request, assistant
// reasoning, tool calls (read a file, run tests, grep) and their results.
func codingSession(turns int, seed uint64) []Event {
	rng := rand.New(rand.NewPCG(seed, 11))
	files := make([]string, 12)
	for i := range files {
		files[i] = fmt.Sprintf("package p%d\n\n%s", i, toolOutput(uint64(100+i), 4000+rng.IntN(20000)))
	}
	suite := toolOutput(7, 3000)
	var out []sessionstore.Event
	for t := 0; t < turns; t++ {
		out = append(out, sessionstore.UserText(fmt.Sprintf("Turn %d: fix the failing test in p%d and explain the change.", t, rng.IntN(len(files)))))
		out = append(out, sessionstore.AssistantMessage(sessionstore.Message{Content: "I will look at the code first.", Reasoning: toolOutput(rng.Uint64(), 300), Usage: &sessionstore.Usage{InputTokens: int64(1000 + t*40), OutputTokens: 80}}))
		for c := 0; c < 1+rng.IntN(4); c++ {
			id := fmt.Sprintf("call_%d_%d", t, c)
			switch rng.IntN(3) {
			case 0:
				f := rng.IntN(len(files))
				out = append(out, sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: id, Name: "read_file", Arguments: []byte(fmt.Sprintf(`{"path":"p%d/p.go"}`, f))}))
				out = append(out, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: id, Output: files[f]}))
			case 1:
				out = append(out, sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: id, Name: "run_tests", Arguments: []byte(`{"pkg":"./..."}`)}))
				out = append(out, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: id, Output: suite + fmt.Sprintf("\nFAIL after %d runs", t), IsError: true}))
			default:
				out = append(out, sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: id, Name: "grep", Arguments: []byte(`{"pattern":"TODO"}`)}))
				out = append(out, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: id, Output: toolOutput(rng.Uint64(), 200+rng.IntN(1500))}))
			}
		}
		out = append(out, sessionstore.AssistantMessage(sessionstore.Message{Content: toolOutput(rng.Uint64(), 400)}))
	}
	evs := make([]Event, len(out))
	for i, ev := range out {
		evs[i] = fromSS(ev)
	}
	return evs
}

// loadTranscript reads a transcript file (one JSON object per line with
// kind, role and record: what a harness passes to Append), as the
// package's transcript_test.go does.
func loadTranscript(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	var out []Event
	for sc.Scan() {
		var l struct {
			Kind   string          `json:"kind"`
			Role   string          `json:"role,omitempty"`
			Record json.RawMessage `json:"record"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, Event{Kind: l.Kind, Role: l.Role, Payload: l.Record})
	}
	return out, sc.Err()
}

// payloadBytes adds up the payload sizes of evs.
func payloadBytes(evs []Event) int64 {
	var n int64
	for _, ev := range evs {
		n += int64(len(ev.Payload))
	}
	return n
}
