#!/usr/bin/env bash
# Samples, every 2 s until the 27B prepare is done, the summed RSS (KiB) of the processes running
# the build's modules, into /tmp/omni/rss.txt ("epoch KiB").
while [ ! -f /tmp/omni/prepare-open-jev.done ]; do
  echo "$(date +%s) $(ps -eo rss=,args= | awk '/models\.(export|qwen35|open_jev)/ {s+=$1} END {print s+0}')" >> /tmp/omni/rss.txt
  sleep 2
done
