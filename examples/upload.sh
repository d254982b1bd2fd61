#!/bin/sh
# The upload job from the "153 uploads" write-up, done right: the marker is committed right after
# the irreversible upload, so the flaky step after it can fail (and the run can be retried) without
# uploading again.
set -u
outbox=${OUTBOX:-$CRONVISOR_STATE_DIR/outbox}
uploaded=${UPLOADED:-$CRONVISOR_STATE_DIR/uploaded.txt}
mkdir -p "$outbox"
[ -n "$(ls "$outbox")" ] || for n in 1 2 3; do echo "attachment $n" > "$outbox/file-$n.txt"; done
for f in "$outbox"/*; do
  name=$(basename "$f")
  # Side effect, then marker: `once` marks the key the moment the upload exits 0.
  cronvisor once "upload:$name" -- sh -c 'echo "$1" >> "$2"' up "$name" "$uploaded"
done
# The flaky downstream step (FLAKY=1 makes it fail). Its failure fails the run, but the
# uploads above are already marked: a retry skips them.
if [ "${FLAKY:-0}" = 1 ]; then
  echo "downstream notification failed" >&2
  exit 1
fi
echo "notified downstream"
