"""The resource budget the fuzzer runs pubsim under (environment variables of each case).

Fuzzed inputs may ask for enormous runs; pubsim refuses those up front when
its estimate exceeds the budget. The fuzzer uses a budget far below the
default, so that an accepted case runs in about a second.
"""

#: At most 50,000 published messages and 2,000 clients per case (pubsim.budget reads these variables).
FUZZ_ENV: dict[str, str] = {"PUBSIM_MAX_MESSAGES": "5e4", "PUBSIM_MAX_CLIENTS": "2000", "PUBSIM_MAX_MEMORY": "1GiB"}
