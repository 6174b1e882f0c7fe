package export

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// Markdown writes the session's active path (opts.Scope ActivePath, the
// default, or Context) to w as a transcript to read: a title with the
// session's name, model, working directory and times, then each event in
// order. A message is a section headed by its role, with its content as it
// is (messages are usually Markdown already) and its reasoning in a
// collapsed <details> block; a tool call shows its name, call id and
// arguments in a fenced json block; a tool result is a collapsed <details>
// block with its output fenced, cut after opts.MaxOutput bytes (with a note
// of the whole size) unless opts.Full; a compaction or branch summary is a
// quoted block saying so; a custom event shows its record as json. Where
// the path branches (an event with siblings: other children of its parent),
// a note names the other branches.
//
// The output is UTF-8 (bytes of a record that are not are shown as
// U+FFFD) and depends only on the stored session and opts: the same
// session exports to the same bytes. Records stored as blobs are read and shown.
//
// Errors: as JSONL; ErrScope for Tree.
func Markdown(ctx context.Context, w io.Writer, st *sessionstore.Store, session uuid.UUID, opts Options) (stats Stats, err error) {
	scope, err := checkScope(opts.Scope, ActivePath, false)
	if err != nil {
		return stats, err
	}
	p, err := makePlan(ctx, st, session, scope, true, false)
	if err != nil {
		return stats, err
	}
	max := opts.MaxOutput
	if max <= 0 {
		max = DefaultMaxOutput
	}
	children := make(map[uuid.UUID][]uuid.UUID, len(p.nodes))
	for _, n := range p.nodes {
		children[n.ParentID] = append(children[n.ParentID], n.ID)
	}
	out := newOutput(w)
	defer func() { stats.Bytes = out.cw.n }()
	md := &mdWriter{out: out, children: children, calls: map[string]string{}, full: opts.Full, max: max}
	md.title(p)
	if err := out.err(); err != nil {
		return stats, writeErr(err)
	}
	err = p.each(ctx, st, session, func(ev sessionstore.Event) error {
		if ev.Digest != "" {
			stats.Blobs++
			if ev.Record == nil {
				r, err := st.Resolve(ctx, session, ev)
				if err != nil {
					return fmt.Errorf("export: session %s: event %s: %w", session, ev.ID, err)
				}
				ev = r
			}
		}
		md.event(ev)
		if err := out.err(); err != nil {
			return writeErr(err)
		}
		stats.Events++
		return nil
	})
	if err != nil {
		return stats, err
	}
	return stats, out.flush()
}

// mdWriter writes the Markdown of one export.
type mdWriter struct {
	out      *output
	children map[uuid.UUID][]uuid.UUID
	calls    map[string]string // call id -> tool name, of the calls seen
	full     bool
	max      int
}

func (m *mdWriter) printf(format string, args ...any) { fmt.Fprintf(m.out.bw, format, args...) }
func (m *mdWriter) str(s string)                      { m.out.bw.WriteString(s) }

// oneLine makes s fit on one line of Markdown text.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(s)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func (m *mdWriter) title(p *plan) {
	meta := p.meta
	name := oneLine(meta.Name)
	if name == "" {
		name = "Session " + meta.ID.String()
	}
	m.printf("# %s\n\n", name)
	m.printf("- Session: `%s`\n", meta.ID)
	if meta.Model != "" {
		m.printf("- Model: %s\n", oneLine(meta.Model))
	}
	if meta.WorkingDir != "" {
		m.printf("- Working directory: `%s`\n", strings.ReplaceAll(oneLine(meta.WorkingDir), "`", "'"))
	}
	m.printf("- Created: %s\n", stamp(meta.CreatedAt))
	if len(p.nodes) > 0 || len(p.loaded) > 0 {
		first, last := p.span()
		m.printf("- Events: %s to %s\n", stamp(first), stamp(last))
	}
	if f := meta.ForkedFrom; f != nil {
		m.printf("- Forked from: session `%s` at event `%s`\n", f.Session, f.Event)
	}
	if meta.ParentSession != uuid.Nil {
		m.printf("- Subagent of: session `%s` (event `%s`, depth %d)\n", meta.ParentSession, meta.SpawnedBy, meta.Depth)
	}
	what := "the active path"
	if p.loaded != nil {
		what = "the context (from the newest compaction)"
	}
	head := "-" // a session without events has no HEAD
	if p.head != uuid.Nil {
		head = "`" + sessionstore.ShortID(p.head) + "`"
	}
	m.printf("- Shown: %s, %d events of %d, HEAD %s\n\n", what, p.count(), len(p.nodes), head)
}

// span is the time of the first and last event the plan shows.
func (p *plan) span() (time.Time, time.Time) {
	if p.loaded != nil {
		if len(p.loaded) == 0 {
			return time.Time{}, time.Time{}
		}
		return p.loaded[0].Time, p.loaded[len(p.loaded)-1].Time
	}
	if len(p.ids) == 0 {
		return time.Time{}, time.Time{}
	}
	at := make(map[uuid.UUID]time.Time, 2)
	first, last := p.ids[0], p.ids[len(p.ids)-1]
	for _, n := range p.nodes {
		if n.ID == first || n.ID == last {
			at[n.ID] = n.Time
		}
	}
	return at[first], at[last]
}

var roleNames = map[sessionstore.Role]string{
	sessionstore.RoleUser:      "User",
	sessionstore.RoleAssistant: "Assistant",
	sessionstore.RoleTool:      "Tool",
}

func (m *mdWriter) event(ev sessionstore.Event) {
	m.branchNote(ev)
	stampLine := fmt.Sprintf("<sub>%s · `%s`</sub>\n\n", stamp(ev.Time), sessionstore.ShortID(ev.ID))
	switch ev.Kind {
	case sessionstore.KindMessage:
		msg, err := ev.Message()
		if err != nil {
			break
		}
		role := roleNames[ev.Role]
		if role == "" {
			role = "Message"
		}
		m.printf("## %s\n\n", role)
		m.str(stampLine)
		if msg.Reasoning != "" {
			m.str("<details>\n<summary>Reasoning</summary>\n\n")
			m.fenced("text", msg.Reasoning)
			m.str("</details>\n\n")
		}
		if msg.Content != "" {
			m.str(strings.TrimRight(safeMarkdown(msg.Content), "\n"))
			m.str("\n\n")
		}
		if len(msg.ToolCalls) > 0 {
			names := make([]string, len(msg.ToolCalls))
			for i, c := range msg.ToolCalls {
				names[i] = fmt.Sprintf("`%s` (`%s`)", oneLine(c.Name), oneLine(c.CallID))
			}
			m.printf("Announces tool calls: %s\n\n", strings.Join(names, ", "))
		}
		return
	case sessionstore.KindToolCall:
		c, err := ev.ToolCall()
		if err != nil {
			break
		}
		m.calls[c.CallID] = c.Name
		m.printf("### Tool call: `%s`\n\n", oneLine(c.Name))
		m.str(stampLine)
		m.printf("Call `%s`, arguments:\n\n", oneLine(c.CallID))
		m.fenced("json", indentJSON(c.Arguments))
		return
	case sessionstore.KindToolResult:
		r, err := ev.ToolResult()
		if err != nil {
			break
		}
		what := "Tool result"
		if name := m.calls[r.CallID]; name != "" {
			what += ": `" + oneLine(name) + "`"
		}
		var notes []string
		if r.IsError {
			notes = append(notes, "error")
		}
		if r.Outcome != "" {
			notes = append(notes, oneLine(r.Outcome))
		}
		notes = append(notes, fmt.Sprintf("%d bytes", len(r.Output)))
		m.printf("<details>\n<summary>%s (call <code>%s</code>, %s)</summary>\n\n", what, oneLine(r.CallID), strings.Join(notes, ", "))
		m.str(stampLine)
		text := r.Output
		cut := !m.full && len(text) > m.max
		if cut {
			text = cutUTF8(text, m.max)
		}
		m.fenced("text", text)
		if cut {
			m.printf("*Output cut: %d of %d bytes shown.*\n\n", len(text), len(r.Output))
		}
		m.str("</details>\n\n")
		return
	case sessionstore.KindCompaction:
		c, err := ev.Compaction()
		if err != nil {
			break
		}
		m.printf("> **Compaction** <sub>%s · `%s`</sub>\n>\n", stamp(ev.Time), sessionstore.ShortID(ev.ID))
		m.printf("> The history before this point is summarized (summary of `%s`", sessionstore.ShortID(c.Summarized))
		if c.TokensBefore > 0 {
			m.printf(", %d tokens before", c.TokensBefore)
		}
		if c.FirstKept != uuid.Nil {
			m.printf("; kept verbatim from `%s`", sessionstore.ShortID(c.FirstKept))
		}
		m.str(").\n")
		m.summary(c.Summary)
		m.str("\n")
		return
	case sessionstore.KindBranchSummary:
		b, err := ev.BranchSummary()
		if err != nil {
			break
		}
		m.printf("> **Branch summary** <sub>%s · `%s`</sub>\n>\n", stamp(ev.Time), sessionstore.ShortID(ev.ID))
		m.printf("> Summary of the branch left behind at `%s`.\n", sessionstore.ShortID(b.AbandonedHead))
		m.summary(b.Summary)
		m.str("\n")
		return
	}
	// A custom event, or a record that does not decode as its kind's.
	m.printf("### %s event\n\n", oneLine(string(ev.Kind)))
	m.str(stampLine)
	m.fenced("json", indentJSON(ev.Record))
}

// summary writes the fields of s as quoted lists.
func (m *mdWriter) summary(s sessionstore.Summary) {
	for _, f := range []struct {
		name  string
		items []string
	}{
		{"Goals", s.Goals}, {"Constraints", s.Constraints}, {"Decisions", s.Decisions},
		{"Files changed", s.FilesChanged}, {"Unresolved", s.Unresolved}, {"Facts", s.Facts},
	} {
		if len(f.items) == 0 {
			continue
		}
		m.printf(">\n> **%s**\n>\n", f.name)
		for _, it := range f.items {
			m.printf("> - %s\n", quoteLines(safeMarkdown(it), ">   "))
		}
	}
	if s.Text != "" {
		m.printf(">\n> %s\n", quoteLines(safeMarkdown(s.Text), "> "))
	}
}

// quoteLines puts prefix before every line of s but the first.
func quoteLines(s, prefix string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

// branchNote notes the other children of ev's parent, if any.
func (m *mdWriter) branchNote(ev sessionstore.Event) {
	sib := m.children[ev.ParentID]
	if len(sib) < 2 {
		return
	}
	var others []string
	n := 0
	for i, id := range sib {
		if id == ev.ID {
			n = i + 1
			continue
		}
		others = append(others, "`"+sessionstore.ShortID(id)+"`")
	}
	where := "The session has several roots"
	if ev.ParentID != uuid.Nil {
		where = fmt.Sprintf("The path branches at `%s`", sessionstore.ShortID(ev.ParentID))
	}
	m.printf("*%s: this is branch %d of %d; the others start at %s.*\n\n", where, n, len(sib), strings.Join(others, ", "))
}

// fenced writes s in a fenced code block longer than any run of backticks
// in it.
func (m *mdWriter) fenced(lang, s string) {
	s = strings.ToValidUTF8(s, "\uFFFD") // a record's bytes, as stored, may not be UTF-8
	fence := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	m.str(fence + lang + "\n")
	m.str(s)
	if s != "" && !strings.HasSuffix(s, "\n") {
		m.str("\n")
	}
	m.str(fence + "\n\n")
}

func longestRun(s string, c byte) int {
	best, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// cutUTF8 returns at most n bytes of s, not splitting a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// indentJSON returns raw indented, or as it is when it is not JSON.
func indentJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// safeMarkdown returns Markdown text s so that it cannot change the
// structure of the document around it: line ends become "\n", a "<"
// outside fenced code blocks and code spans becomes "&lt;" (no raw HTML
// block or element, such as <details>, <script> or "<!--", is opened), and
// a fenced code block left open at the end is closed.
func safeMarkdown(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	var b strings.Builder
	var fence string // the run that opened the fenced block we are in
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		if fence != "" {
			if closesFence(line, fence) {
				fence = ""
			}
			b.WriteString(line)
			continue
		}
		if f := opensFence(line); f != "" {
			fence = f
			b.WriteString(line)
			continue
		}
		b.WriteString(escapeHTML(line))
	}
	if fence != "" {
		b.WriteString("\n" + fence)
	}
	return b.String()
}

// opensFence returns the run of backticks or tildes that opens a fenced
// code block on line, or "".
func opensFence(line string) string {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return ""
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	if n < 3 || (t[0] == '`' && strings.Contains(t[n:], "`")) {
		return ""
	}
	return t[:n]
}

// closesFence reports whether line closes a fenced block opened by fence.
func closesFence(line, fence string) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return false
	}
	n := 0
	for n < len(t) && t[n] == fence[0] {
		n++
	}
	return n >= len(fence) && strings.Trim(t[n:], " \t") == ""
}

// escapeHTML writes each "<" of line as "&lt;", but in code spans (a run
// of backticks up to the next run as long on the line).
func escapeHTML(line string) string {
	if !strings.Contains(line, "<") {
		return line
	}
	var b strings.Builder
	for i := 0; i < len(line); {
		switch line[i] {
		case '<':
			b.WriteString("&lt;")
			i++
		case '`':
			n := 0
			for i+n < len(line) && line[i+n] == '`' {
				n++
			}
			end := closingRun(line, i+n, n)
			if end < 0 {
				b.WriteString(line[i : i+n])
				i += n
				continue
			}
			b.WriteString(line[i:end])
			i = end
		default:
			b.WriteByte(line[i])
			i++
		}
	}
	return b.String()
}

// closingRun returns the index just past the first run of exactly n
// backticks in line at or after from, or -1.
func closingRun(line string, from, n int) int {
	for j := from; j < len(line); {
		if line[j] != '`' {
			j++
			continue
		}
		k := j
		for k < len(line) && line[k] == '`' {
			k++
		}
		if k-j == n {
			return k
		}
		j = k
	}
	return -1
}
