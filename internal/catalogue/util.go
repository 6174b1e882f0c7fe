package catalogue

// readBatch is the number of session.json files below which a rebuild
// reads them from one goroutine; each further batch may add one.
const readBatch = 64

func bytesLess(a, b []byte) bool { return string(a) < string(b) }
