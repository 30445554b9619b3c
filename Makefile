# rex — make targets. `make run` opens the console, `make test` runs every test.
GO      ?= go
BIN     := bin
# A count, not a duration: Go 1.26's fuzz coordinator can fail a target with
# "context deadline exceeded" when a duration runs out (golang/go#75804).
FUZZTIME ?= 5000x
# rexd builds embedded in rex: the targets rex can bootstrap.
# linux/arm is built for ARMv6 (GOARM=6 below), so that every 32-bit
# Raspberry Pi runs it, armv6l and armv7l alike.
PAYLOAD_PLATFORMS := linux/amd64 linux/arm64 linux/arm
PAYLOAD_DIR := internal/payload/rexd

.PHONY: all build rexd payload run test race fuzz bench lint clean inspector man

all: build

rexd:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags="-s -w" -o $(BIN)/rexd ./cmd/rexd

# payload cross-builds rexd (static, stripped) for every platform,
# compresses it into the directory rex embeds, and writes its manifest
# rexd-<os>-<arch>.sum ("<sha256> <size>"): rex learns the build hash from
# it without decompressing, and refuses a build that does not match it.
payload:
	@mkdir -p $(PAYLOAD_DIR)
	@for p in $(PAYLOAD_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; f=$(PAYLOAD_DIR)/rexd-$$os-$$arch; \
		rm -f $$f.sum; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch GOARM=6 $(GO) build -trimpath -ldflags="-s -w" -o $$f ./cmd/rexd || exit 1; \
		sum=$$( (sha256sum 2>/dev/null || shasum -a 256) < $$f | cut -d' ' -f1); \
		[ -n "$$sum" ] || { echo "make payload: needs sha256sum or shasum"; exit 1; }; \
		size=$$(wc -c < $$f | tr -d ' '); \
		gzip -9 -n -f $$f || exit 1; \
		printf '%s %s\n' "$$sum" "$$size" > $$f.sum.tmp && mv -f $$f.sum.tmp $$f.sum || exit 1; \
	done

build: rexd payload
	$(GO) build -trimpath -o $(BIN)/rex ./cmd/rex

run: build
	$(BIN)/rex

# man writes rex(1) from the command tree (rex man prints the same).
man:
	$(GO) run ./cmd/rex man > docs/rex.1

test: lint payload inspector
	$(GO) test -count=1 -timeout 30m ./...
	# rex ships rexd for 32-bit ARM: rexd's own tests once more as a 32-bit
	# build (386, which this amd64 machine runs), where int is 32 bits and
	# 64-bit atomics need alignment, as there.
	CGO_ENABLED=0 GOARCH=386 $(GO) test -count=1 -timeout 10m ./cmd/rexd/ ./internal/rexd/ ./internal/cas/ ./internal/protocol/
	$(MAKE) fuzz FUZZTIME=$(FUZZTIME)

# inspector installs the MCP Inspector CLI pinned by .ci/inspector's lock
# file, which rex mcp's end-to-end test drives (npm ci, once per lock file).
INSPECTOR_STAMP := .ci/inspector/node_modules/.rex-installed
inspector: $(INSPECTOR_STAMP)
$(INSPECTOR_STAMP): .ci/inspector/package-lock.json
	npm ci --prefix .ci/inspector --no-audit --no-fund --ignore-scripts --loglevel=error
	@touch $@

# race runs every test under the race detector (CI runs it after test).
race: payload inspector
	$(GO) test -race -count=1 -timeout 40m ./...

# fuzz runs every fuzz target for FUZZTIME each.
fuzz:
	@set -e; log=$$(mktemp); for pkg in $$($(GO) list ./...); do \
		dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
		for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
			echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
			$(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg >$$log 2>&1 || \
				{ cat $$log; rm -f $$log; exit 1; }; \
		done; \
	done; rm -f $$log

bench: build
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	# rex runs on operators' Macs too: it must at least build and vet there.
	GOOS=darwin GOARCH=arm64 $(GO) vet ./...
	# rexd runs on 32-bit ARM Linux too (the payload's linux/arm).
	GOOS=linux GOARCH=arm $(GO) vet ./cmd/rexd/ ./internal/rexd/ ./internal/cas/ ./internal/protocol/

clean:
	rm -rf $(BIN) $(PAYLOAD_DIR)/rexd-*
