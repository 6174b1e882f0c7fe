module github.com/sessionstore/sessionstore/webtest

go 1.26

require (
	github.com/chromedp/chromedp v0.23.1
	github.com/google/uuid v1.6.0
	github.com/sessionstore/sessionstore v0.0.0
	github.com/sessionstore/sessionstore/cmd v0.0.0
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/chromedp/cdproto v0.160.1 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)

replace (
	github.com/sessionstore/sessionstore => ../
	github.com/sessionstore/sessionstore/cmd => ../cmd
)
