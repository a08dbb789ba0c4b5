#!/bin/sh
# Patroni runs this once, on the node that initialises the cluster, with a superuser's connection
# string as $1: the role and database the scheduler uses (its password from the environment's
# SCHEDULER_DB_PASSWORD, read by psql itself, so it is on no command line).
set -eu
: "${SCHEDULER_DB_PASSWORD:?is not set}"
psql "$1" -v ON_ERROR_STOP=1 <<'SQL'
\getenv password SCHEDULER_DB_PASSWORD
CREATE ROLE scheduler LOGIN PASSWORD :'password';
CREATE DATABASE scheduler OWNER scheduler;
SQL
