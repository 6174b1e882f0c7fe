// Package webtest drives the web view of package
// github.com/sessionstore/sessionstore/cmd/web in headless Chromium: the
// session list, the tree, the path and a live append, on a branched session
// a writer Store builds beside the read-only Store the view reads.
//
// It is a module of its own so that neither the library nor the inspector
// depends on chromedp. It holds tests only, and writes nothing but the
// temporary stores of its tests (and, with SESSIONSTORE_SCREENSHOT set, the
// screenshot named there).
package webtest
