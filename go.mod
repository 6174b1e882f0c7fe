module github.com/sessionstore/sessionstore

go 1.26

require github.com/google/uuid v1.6.0

require github.com/klauspost/compress v1.20.4

require (
	github.com/stretchr/testify v1.12.1
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
