# cursorflow developer targets. `make test` is what CI runs (.ci/run).
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := test

GO        ?= go
PKGS      ?= ./...
TESTFLAGS ?= -race -count=1 -timeout 40m
FUZZTIME  ?= 60s
GOBIN     := $(shell $(GO) env GOBIN)
ifeq ($(GOBIN),)
GOBIN     := $(shell $(GO) env GOPATH)/bin
endif
GOLANGCI_LINT ?= $(shell command -v golangci-lint 2>/dev/null || echo $(GOBIN)/golangci-lint)

.PHONY: test testenv testenv-down vet lint tools bench bench-vet fuzz fmt

## test: bring the backends up (scripts/testenv), then go vet and the race-enabled suite,
## and check that the bench module (its own go.mod) still builds, vets and passes its tests
test: testenv bench-vet
	set -a; . ./.testenv.env; set +a; \
	$(GO) vet $(PKGS); \
	$(GO) test $(TESTFLAGS) $(PKGS)

## bench-vet: build, vet and test examples/bench, a module of its own that `./...` leaves out
## (its tests need no backend: its schedule and how it compares drains)
bench-vet:
	cd examples/bench && $(GO) build -o /dev/null . && $(GO) vet ./... && $(GO) test ./...

## testenv: start whatever backend is missing and write .testenv.env
testenv:
	scripts/testenv up >/dev/null

## testenv-down: stop the servers that scripts/testenv up started
testenv-down:
	scripts/testenv down

## vet: go vet only
vet:
	$(GO) vet $(PKGS)

## lint: golangci-lint over the library and the bench module (install it with `make tools`)
lint:
	@if [ -x "$(GOLANGCI_LINT)" ]; then \
		"$(GOLANGCI_LINT)" run $(PKGS) && \
		cd examples/bench && "$(GOLANGCI_LINT)" run --config ../../.golangci.yml ./...; \
	else \
		echo "golangci-lint is not installed: run 'make tools'" >&2; exit 1; \
	fi

## tools: install the developer tools (golangci-lint v2)
tools:
	$(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@latest

## bench: the end-to-end benchmark program (BENCHFLAGS, e.g. BENCHFLAGS='-n 100000 -runs 3')
BENCHFLAGS ?=
bench: testenv
	set -a; . ./.testenv.env; set +a; \
	cd examples/bench && $(GO) run . $(BENCHFLAGS)

## fuzz: fuzz the playbook parser, the event logs' JSON check, then the payload decoder, for FUZZTIME each
fuzz:
	$(GO) test -run '^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME) ./dsl/
	$(GO) test -run '^$$' -fuzz=FuzzValid -fuzztime=$(FUZZTIME) ./internal/jsonvalid/
	$(GO) test -run '^$$' -fuzz=FuzzUnmarshalStruct -fuzztime=$(FUZZTIME) ./internal/jsonnum/

## fmt: gofmt every Go file in place
fmt:
	gofmt -s -w $$(git ls-files -co --exclude-standard '*.go')
