# frozen_string_literal: true

# LAB_SQL_LOG=on: every statement ActiveRecord runs, as the `sql.active_record` notification Rails'
# own development log reads, is one line of <LAB_DB>.sql.log in the contract's shape (ruby-puma's
# Lab::SqlLog: one write(2) under a mutex, right after the statement, in the thread that ran it).
# A query-cache hit ran no statement and writes no line; a statement written on several lines
# (Rails' schema queries) is logged on one, its whitespace runs as one space.
if Lab.config.sql_log == "on"
  log = Lab::SqlLog.new("#{Lab.config.db}.sql.log")
  ActiveSupport::Notifications.subscribe("sql.active_record") do |_name, start, finish, _id, payload|
    next if payload[:cached]

    binds = payload[:type_casted_binds]
    binds = binds.call if binds.respond_to?(:call)
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC) - (finish - start)
    log.statement(payload[:sql].squish, Array(binds), started)
  end
end
