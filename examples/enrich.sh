#!/bin/sh
# The enrichment worker from the postmortem, done right: every item runs under `cronvisor once`,
# so a kill at item 118 and a restart resumes at 118, and a full rerun writes nothing twice.
# The "warehouse" is a file of rows; a real job would INSERT into its database.
set -eu
items=${ITEMS:-200}
warehouse=${WAREHOUSE:-$CRONVISOR_STATE_DIR/warehouse.txt}
i=0
while [ "$i" -lt "$items" ]; do
  cronvisor once "task-$i" -- sh -c 'echo "$1 $CRONVISOR_RUN_ID" >> "$2"' row "task-$i" "$warehouse"
  i=$((i + 1))
  # Tell status that work moves (markers count as progress too; this adds a readable message).
  [ $((i % 50)) -eq 0 ] && cronvisor progress "item $i of $items"
done
echo "enriched $items items; warehouse has $(wc -l < "$warehouse") rows"
