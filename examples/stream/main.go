// Command stream shows live fan-out: a simulated agent streams its answer
// and a tool's output as deltas (Publish: live, never written) and records
// the settled message and tool result as events (Append: durable), while a
// subscriber shows both as they happen.
//
// By default it runs one turn, prints the live stream to the terminal and
// exits. With -http it serves the stream as Server-Sent Events on a
// loopback address instead, running a turn every few seconds until
// interrupted. There the deltas are durable (Options.DurableDeltas) and
// the stream is read with Store.Tail: each SSE message carries the
// update's cursor as its id, so a browser that reconnects (sending
// Last-Event-ID) resumes exactly where it left off, and a stream server
// in another process, reading the store read-only, would serve the same:
//
//	go run ./examples/stream
//	go run ./examples/stream -http 127.0.0.1:8080
//	curl -N http://127.0.0.1:8080/sessions/<id>/events   # or open http://127.0.0.1:8080/
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

func main() {
	dir := flag.String("dir", "", "store directory (default: a new temporary directory, removed at exit)")
	addr := flag.String("http", "", "serve Server-Sent Events on this loopback address (e.g. 127.0.0.1:8080) until interrupted")
	delay := flag.Duration("delay", 0, "pause between streamed deltas (default 10ms in the terminal, 60ms with -http)")
	flag.Parse()
	if *dir == "" {
		tmp, err := os.MkdirTemp("", "sessionstore-stream-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		*dir = tmp
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *addr == "" {
		err = runTerminal(ctx, *dir, orDefault(*delay, 10*time.Millisecond))
	} else {
		err = runHTTP(ctx, *dir, *addr, orDefault(*delay, 60*time.Millisecond))
	}
	if err != nil {
		log.Fatal(err)
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// newSession opens the store in dir and creates the session to stream.
func newSession(ctx context.Context, dir string, opts *sessionstore.Options) (*sessionstore.Store, sessionstore.Meta, error) {
	store, err := sessionstore.Open(dir, opts)
	if err != nil {
		return nil, sessionstore.Meta{}, err
	}
	meta, err := store.Create(ctx, sessionstore.Meta{Name: "stream", Model: "example-model"})
	if err != nil {
		store.Close()
		return nil, sessionstore.Meta{}, err
	}
	return store, meta, nil
}

// runTerminal runs one turn and prints its live stream.
func runTerminal(ctx context.Context, dir string, delay time.Duration) error {
	store, meta, err := newSession(ctx, dir, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	fmt.Printf("session %s in %s\n", meta.ID, dir)
	fmt.Println(`"live" lines are deltas (Publish, never written); "saved" lines are events, delivered once durable (Append)`)
	fmt.Println()

	// Subscribe before the agent starts, so the stream misses nothing.
	sub, err := store.Subscribe(ctx, meta.ID)
	if err != nil {
		return err
	}
	defer sub.Close()

	type result struct {
		last uuid.UUID
		err  error
	}
	done := make(chan result, 1)
	go func() {
		last, err := turn(ctx, store, meta.ID, delay)
		done <- result{last, err}
	}()

	// Print until the turn's last event has been shown. Every update of
	// the turn is queued before the call that made it returns, in order,
	// so the last event is also the last update.
	p := &printer{w: os.Stdout}
	var shown, last uuid.UUID
	finished := false
	for !finished || shown != last {
		select {
		case u, ok := <-sub.C:
			if !ok {
				return fmt.Errorf("subscription ended: %w", sub.Err())
			}
			p.print(u)
			if u.Event != nil {
				shown = u.Event.ID
			}
		case r := <-done:
			if r.err != nil {
				return r.err
			}
			finished, last = true, r.last
		}
	}
	p.endLine()

	path, err := store.Load(ctx, meta.ID)
	if err != nil {
		return err
	}
	fmt.Printf("\non disk: %d events; the %d deltas were never written\n", len(path), p.deltas)
	return nil
}

// turn simulates one agent turn: a question, a streamed answer, a tool
// call whose output streams in, its result and a streamed conclusion. It
// returns the id of the last event it appended.
func turn(ctx context.Context, store *sessionstore.Store, id uuid.UUID, delay time.Duration) (uuid.UUID, error) {
	pause := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
			return nil
		}
	}
	// stream publishes each piece as a delta, pausing between them.
	stream := func(kind sessionstore.DeltaKind, callID string, pieces []string) error {
		for _, piece := range pieces {
			if err := store.Publish(ctx, id, sessionstore.Delta{Kind: kind, CallID: callID, Data: piece}); err != nil {
				return err
			}
			if err := pause(); err != nil {
				return err
			}
		}
		return nil
	}
	tokens := func(s string) []string { return strings.SplitAfter(s, " ") }
	var last sessionstore.Event
	appendEv := func(ev sessionstore.Event) error {
		var err error
		last, err = store.Append(ctx, id, ev)
		return err
	}

	if err := appendEv(sessionstore.UserText("Why does go test fail?")); err != nil {
		return uuid.Nil, err
	}
	reasoning := "The user asks about a failure I have not seen yet; run the tests first."
	answer := "Let me run the tests."
	if err := stream(sessionstore.DeltaReasoning, "", tokens(reasoning)); err != nil {
		return uuid.Nil, err
	}
	if err := stream(sessionstore.DeltaText, "", tokens(answer)); err != nil {
		return uuid.Nil, err
	}
	if err := appendEv(sessionstore.AssistantMessage(sessionstore.Message{Content: answer, Reasoning: reasoning, Model: "example-model"})); err != nil {
		return uuid.Nil, err
	}

	const callID = "call_1"
	if err := appendEv(sessionstore.ToolCallEvent(sessionstore.ToolCall{
		CallID: callID, Name: "run", Arguments: json.RawMessage(`{"cmd":"go test ./..."}`),
	})); err != nil {
		return uuid.Nil, err
	}
	output := []string{
		"ok   example.com/app/config  0.012s\n",
		"--- FAIL: TestParse (0.00s)\n",
		"    parse_test.go:14: got 3 tokens, want 4\n",
		"FAIL example.com/app/parse   0.009s\n",
	}
	if err := stream(sessionstore.DeltaToolOutput, callID, output); err != nil {
		return uuid.Nil, err
	}
	if err := appendEv(sessionstore.ToolResultEvent(sessionstore.ToolResult{
		CallID: callID, Output: strings.Join(output, ""), IsError: true,
	})); err != nil {
		return uuid.Nil, err
	}

	conclusion := "TestParse fails: the tokenizer drops the last token when the input has no trailing newline."
	if err := stream(sessionstore.DeltaText, "", tokens(conclusion)); err != nil {
		return uuid.Nil, err
	}
	if err := appendEv(sessionstore.AssistantMessage(sessionstore.Message{Content: conclusion, Model: "example-model"})); err != nil {
		return uuid.Nil, err
	}
	return last.ID, nil
}

// printer renders updates for a terminal: deltas as they stream, on a
// "live" line per run of deltas of one kind, and events on "saved" lines.
type printer struct {
	w      io.Writer
	open   string // the live line being written, "" if none
	bol    bool   // at the beginning of a line of the live block
	deltas int
}

func (p *printer) print(u sessionstore.Update) {
	switch {
	case u.Delta != nil:
		p.deltas++
		label := string(u.Delta.Kind)
		if u.Delta.CallID != "" {
			label += " " + u.Delta.CallID
		}
		if p.open != label {
			p.endLine()
			fmt.Fprintf(p.w, "  live  %-*s ", labelWidth, label+":")
			p.open, p.bol = label, false
		}
		// Indent the lines of multi-line output under the first.
		for i, line := range strings.Split(u.Delta.Data, "\n") {
			if i > 0 {
				fmt.Fprintln(p.w)
				p.bol = true
			}
			if line == "" {
				continue
			}
			if p.bol {
				fmt.Fprint(p.w, strings.Repeat(" ", len("  live  ")+labelWidth+1))
				p.bol = false
			}
			fmt.Fprint(p.w, line)
		}
	case u.Event != nil:
		p.endLine()
		fmt.Fprintf(p.w, "  saved %-*s %s  %s\n", labelWidth, fmt.Sprintf("%s %s:", u.Event.Role, u.Event.Kind), sessionstore.ShortID(u.Event.ID), summary(u.Event))
	case u.Missed > 0:
		p.endLine()
		fmt.Fprintf(p.w, "  (missed %d updates: the events among them can be read back with Load)\n", u.Missed)
	}
}

// labelWidth fits the longest label of the simulated turn.
const labelWidth = len("assistant tool_call:")

// endLine finishes the live line being written, if any.
func (p *printer) endLine() {
	if p.open != "" && !p.bol {
		fmt.Fprintln(p.w)
	}
	p.open, p.bol = "", false
}

// summary is a one-line view of an event's record.
func summary(ev *sessionstore.Event) string {
	var s string
	switch ev.Kind {
	case sessionstore.KindMessage:
		m, _ := ev.Message()
		s = fmt.Sprintf("%q", m.Content)
	case sessionstore.KindToolCall:
		c, _ := ev.ToolCall()
		s = fmt.Sprintf("%s %s %s", c.CallID, c.Name, c.Arguments)
	case sessionstore.KindToolResult:
		r, _ := ev.ToolResult()
		s = fmt.Sprintf("%s, %d lines, error=%t", r.CallID, strings.Count(r.Output, "\n"), r.IsError)
	default:
		s = string(ev.Record)
	}
	return s
}

// runHTTP serves the session's stream as Server-Sent Events and runs a
// turn every few seconds until ctx is done.
func runHTTP(ctx context.Context, dir, addr string, delay time.Duration) error {
	if err := loopbackOnly(addr); err != nil {
		return err
	}
	store, meta, err := newSession(ctx, dir, &sessionstore.Options{DurableDeltas: true})
	if err != nil {
		return err
	}
	defer store.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /sessions/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		serveEvents(store, w, r)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, indexPage, meta.ID)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	// Requests' contexts derive from ctx: an interrupt ends every stream.
	srv := &http.Server{Handler: mux, BaseContext: func(net.Listener) context.Context { return ctx }, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := fmt.Sprintf("http://%s/sessions/%s/events", ln.Addr(), meta.ID)
	log.Printf("session %s in %s", meta.ID, dir)
	log.Printf("streaming at %s (open http://%s/ in a browser, or: curl -N %s); Ctrl-C stops", url, ln.Addr(), url)

	for err == nil {
		if _, err = turn(ctx, store, meta.ID, delay); err != nil {
			break
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(3 * time.Second):
		}
	}
	// Closing the store ends every tail, so the streams end and
	// Shutdown finds the connections idle.
	if cerr := store.Close(); cerr != nil {
		log.Printf("close store: %v", cerr)
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if serr := srv.Shutdown(shutdown); serr != nil {
		log.Printf("shutdown: %v", serr)
	}
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil // interrupted: the normal way out
	}
	return err
}

// loopbackOnly refuses to serve a session's contents beyond this machine.
func loopbackOnly(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-http %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("-http %q: this example serves on a loopback address only (127.0.0.1, [::1] or localhost)", addr)
}

// serveEvents streams a session with Store.Tail: its events, then the
// deltas not yet settled, then every update as it happens; from the
// cursor of the request's Last-Event-ID header (or its "cursor" query
// parameter), when it has one, exactly after that update.
//
// Each message is an SSE "id:" line holding the update's cursor, an
// "event:" line naming the update ("event" or "delta") and a "data:" line
// holding it as JSON. A browser's EventSource sends the last id it
// received when it reconnects.
func serveEvents(store *sessionstore.Store, w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		http.Error(w, "bad session id", http.StatusBadRequest)
		return
	}
	cursor := r.Header.Get("Last-Event-ID")
	if cursor == "" {
		cursor = r.URL.Query().Get("cursor")
	}
	ctx := r.Context()
	tail, err := store.Tail(ctx, id, cursor)
	switch {
	case errors.Is(err, sessionstore.ErrInvalidCursor):
		http.Error(w, "bad Last-Event-ID", http.StatusBadRequest)
		return
	case errors.Is(err, sessionstore.ErrNotFound):
		http.Error(w, "no such session or event", http.StatusNotFound)
		return
	case errors.Is(err, sessionstore.ErrClosed), ctx.Err() != nil:
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer tail.Close()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(w)
	send := func(cursor, name string, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			log.Printf("encode %s: %v", name, err)
			return false
		}
		if _, err := fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", cursor, name, b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for u := range tail.C {
		var ok bool
		if u.Event != nil {
			ok = send(u.Cursor, "event", u.Event)
		} else {
			ok = send(u.Cursor, "delta", u.Delta)
		}
		if !ok {
			return
		}
	}
}

// indexPage follows the stream of one session in a browser.
const indexPage = `<!doctype html>
<meta charset="utf-8">
<title>sessionstore stream</title>
<style>body{font:14px monospace;margin:2em} .live{color:#888}</style>
<h1>session %[1]s</h1>
<pre id="out"></pre>
<script>
const out = document.getElementById("out");
const line = (cls, text) => { const s = document.createElement("div"); s.className = cls; s.textContent = text; out.append(s); return s; };
let live = null, liveKey = "";
const es = new EventSource("/sessions/%[1]s/events");
es.addEventListener("delta", e => {
  const d = JSON.parse(e.data), key = d.kind + (d.call_id || "");
  if (key !== liveKey) { live = line("live", "live  " + key + ": "); liveKey = key; }
  live.textContent += d.data;
});
es.addEventListener("event", e => {
  const ev = JSON.parse(e.data);
  live = null; liveKey = "";
  line("saved", "saved " + (ev.role || "-") + " " + ev.kind + ": " + JSON.stringify(ev.record));
});
</script>
`
