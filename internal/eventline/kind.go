package eventline

// KindCode is the compact form of an event's kind, as lines hold it by
// name; KindInvalid (0) is none.
type KindCode uint8

// The kinds, in the order of the root package's Kind constants.
const (
	KindInvalid KindCode = iota
	KindMessage
	KindToolCall
	KindToolResult
	KindCompaction
	KindBranchSummary
	KindCustom
	kindEnd
)

// kindNames are the kinds' names in lines; part of the format.
var kindNames = [kindEnd]string{"", "message", "tool_call", "tool_result", "compaction", "branch_summary", "custom"}

// String returns the kind's name in a line ("" for KindInvalid or a code
// out of range).
func (k KindCode) String() string {
	if k >= kindEnd {
		return ""
	}
	return kindNames[k]
}

// KindCodeOf returns the code of the kind named b, and false for a name
// that is no kind (KindInvalid, the empty name, included).
func KindCodeOf(b []byte) (KindCode, bool) {
	for i := KindMessage; i < kindEnd; i++ {
		if kindNames[i] == string(b) {
			return i, true
		}
	}
	return KindInvalid, false
}

// RoleCode is the compact form of an event's role; RoleNone (0) is the
// role of an event no participant speaks, which a line leaves out.
type RoleCode uint8

// The roles, in the order of the root package's Role constants.
const (
	RoleNone RoleCode = iota
	RoleUser
	RoleAssistant
	RoleTool
	roleEnd
)

// roleNames are the roles' names in lines; part of the format.
var roleNames = [roleEnd]string{"", "user", "assistant", "tool"}

// String returns the role's name in a line ("" for RoleNone or a code out
// of range).
func (r RoleCode) String() string {
	if r >= roleEnd {
		return ""
	}
	return roleNames[r]
}

// RoleCodeOf returns the code of the role named b (RoleNone for the empty
// name), and false for a name that is no role.
func RoleCodeOf(b []byte) (RoleCode, bool) {
	for i := RoleNone; i < roleEnd; i++ {
		if roleNames[i] == string(b) {
			return i, true
		}
	}
	return RoleNone, false
}
