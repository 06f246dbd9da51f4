#!/bin/sh
# Create the Docker secrets deploy/stack.yaml reads, unless the swarm has them already:
# random, or from $TREADLE_NODE_SECRET, $TREADLE_ADMIN_KEY, $TREADLE_AM_HOST_KEY. Run it
# once on a manager before the first `docker stack deploy` (docs/security.md).
set -eu
make_secret() {
    name=$1
    value=$2
    if docker secret inspect "$name" >/dev/null 2>&1; then
        echo "kept $name"
        return
    fi
    if [ -z "$value" ]; then
        value=$(head -c 32 /dev/urandom | base64 | tr -d '\n/+=')
    fi
    printf '%s' "$value" | docker secret create "$name" - >/dev/null
    echo "created $name"
}
make_secret treadle_node_secret "${TREADLE_NODE_SECRET:-}"
make_secret treadle_admin_key "${TREADLE_ADMIN_KEY:-}"
make_secret treadle_am_host_key "${TREADLE_AM_HOST_KEY:-}"
