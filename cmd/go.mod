module github.com/sessionstore/sessionstore/cmd

go 1.26

require (
	github.com/google/uuid v1.6.0
	github.com/sessionstore/sessionstore v0.0.0
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/klauspost/compress v1.20.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)

replace github.com/sessionstore/sessionstore => ../
