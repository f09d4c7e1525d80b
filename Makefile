# The two README commands:
#   make run   - install packages, build, start a single-member cetcd on its
#                defaults (name "default", data ./default.cetcd, 127.0.0.1:2379)
#   make test  - install packages, build (plain and ASan+UBSan), run every test
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= 2

.PHONY: setup build asan run test unit unit-asan integration e2e bench clean

setup:
	bash scripts/setup.sh

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

asan:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCETCD_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j$(JOBS)

run: setup build
	./$(BUILD)/cetcd

test: setup
	bash scripts/test.sh

bench: setup build
	bash bench/compare.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
