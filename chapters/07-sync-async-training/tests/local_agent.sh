#!/bin/sh
# A remote shell that runs the command on this machine, whatever host it is given: the stand-in
# for ssh with which process_workers.sh runs --hostfile's TCP path without a second host.
shift
exec sh -c "$*"
