module github.com/leaseapi/leaseapi/api/lint

go 1.26.8

require github.com/speakeasy-api/openapi v1.26.3

require (
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
