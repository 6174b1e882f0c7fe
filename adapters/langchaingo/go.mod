module github.com/sessionstore/sessionstore/adapters/langchaingo

go 1.26

replace github.com/sessionstore/sessionstore => ../..

require (
	github.com/google/uuid v1.6.0
	github.com/sessionstore/sessionstore v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	github.com/tmc/langchaingo v0.1.14
)

require (
	github.com/dlclark/regexp2 v1.10.0 // indirect
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pkoukk/tiktoken-go v0.1.6 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
