package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// The formats the importers read, as the sessionstore command names them
// (sessionstore import <format>).
const (
	FormatClaude = "claude" // Claude Code transcripts (package claude)
	FormatCodex  = "codex"  // Codex CLI rollouts (package codex)
	FormatPi     = "pi"     // Pi coding agent sessions (package pi)
)

// formatNames describe the formats in messages.
var formatNames = map[string]string{
	FormatClaude: "a Claude Code transcript",
	FormatCodex:  "a Codex rollout",
	FormatPi:     "a Pi session",
}

// FormatName describes format in messages ("a Claude Code transcript"),
// or returns format itself for one it does not know.
func FormatName(format string) string {
	if n, ok := formatNames[format]; ok {
		return n
	}
	return format
}

// ErrWrongFormat is wrapped by a FormatError: a source file that is of
// another format than the importer reads.
var ErrWrongFormat = errors.New("importer: a file of another format")

// FormatError reports a source file that an importer of one format (Want)
// was given and that looks like a file of another format (Looks), which
// the importer that reads it would import. Nothing of the file is
// written.
type FormatError struct {
	Path  string
	Want  string // the format read, such as FormatPi
	Looks string // the format the file looks like, such as FormatClaude
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%s: %v: it looks like %s, not %s (import it as %s)", e.Path, ErrWrongFormat, FormatName(e.Looks), FormatName(e.Want), e.Looks)
}

func (e *FormatError) Unwrap() error { return ErrWrongFormat }

// WrongFormat returns a *FormatError for the file at path, read as format
// want, if line (its first line that is not blank) looks like a line of
// another format; nil otherwise.
func WrongFormat(path, want string, line []byte) error {
	if f := Sniff(line); f != "" && f != want {
		return &FormatError{Path: path, Want: want, Looks: f}
	}
	return nil
}

// Sniff returns the format whose files start with a line such as line
// (the first line of a file that is not blank), or "" when it looks like
// none of them. It tells the formats apart by members each one alone
// writes on its first line:
//
//   - Pi: a session header, {"type":"session","id":...} (with the format
//     version, the start time and the working directory).
//   - Codex: {"type":"session_meta","payload":{...}}, or in the rollouts
//     written before that wrapper, a bare session meta {"id":...,
//     "timestamp":...} without a type.
//   - Claude Code: any of its lines, each of which names the Claude
//     session (sessionId), or a summary ({"type":"summary","leafUuid":...})
//     or a file-history-snapshot ({"type":"file-history-snapshot",
//     "messageId":...}).
func Sniff(line []byte) string {
	var p struct {
		Type      string          `json:"type"`
		ID        json.RawMessage `json:"id"`
		Timestamp json.RawMessage `json:"timestamp"`
		Payload   json.RawMessage `json:"payload"`
		SessionID string          `json:"sessionId"`
		LeafUUID  string          `json:"leafUuid"`
		MessageID string          `json:"messageId"`
	}
	if json.Unmarshal(line, &p) != nil {
		return ""
	}
	switch {
	case p.Type == "session" && nonEmptyString(p.ID) && len(p.Payload) == 0:
		return FormatPi
	case p.Type == "session_meta" && len(p.Payload) > 0 && p.Payload[0] == '{':
		return FormatCodex
	case p.Type == "" && nonEmptyString(p.ID) && nonEmptyString(p.Timestamp) && p.SessionID == "":
		return FormatCodex
	case p.SessionID != "",
		p.Type == "summary" && p.LeafUUID != "",
		p.Type == "file-history-snapshot" && p.MessageID != "":
		return FormatClaude
	}
	return ""
}

// nonEmptyString reports whether raw is a JSON string that is not empty.
func nonEmptyString(raw json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && s != ""
}

// SniffFile returns the format the file at path looks like (Sniff of its
// first line that is not blank), "" when it looks like none or is empty.
// It reads one line, of at most MaxLineSize bytes.
func SniffFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	lr := NewLineReader(f, path, 0)
	for {
		line, _, err := lr.Next()
		switch {
		case errors.Is(err, io.EOF):
			return "", nil
		case errors.Is(err, ErrLineTooLong):
			return "", nil
		case err != nil:
			return "", err
		}
		if len(bytes.TrimSpace(line)) > 0 {
			return Sniff(line), nil
		}
	}
}
