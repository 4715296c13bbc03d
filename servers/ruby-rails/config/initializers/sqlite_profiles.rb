# frozen_string_literal: true

# The profiles' SQLite settings (servers/profiles.toml), installed on Rails 6.1's SQLite adapter
# the way the articles' apps installed theirs: an initializer that prepends to the adapter.
# Rails 6.1 itself maps `timeout:` to sqlite3_busy_timeout (LAB_BUSY=busy_timeout, config/
# application.rb; its C sleep loop holds Ruby's GVL: the sqlite3 gem 1.4.2 never releases it) and
# opens every transaction DEFERRED. The rest did not ship in 6.1:
# - LAB_BUSY=retries:<n> is Rails 7.1's `retries:` (a busy handler `count <= n` that never sleeps);
# - LAB_BUSY=sleep_poll:<ms> is activerecord-enhancedsqlite3-adapter's and Rails 8's busy handler:
#   Ruby's `sleep` between tries releases the GVL, so the other Puma threads run meanwhile;
# - LAB_TXN_MODE=immediate is the enhanced adapter's and Rails 8's BEGIN IMMEDIATE;
# - LAB_PRAGMAS: Rails 7.1's and 8's default pragmas (WAL, synchronous=NORMAL, mmap ...), applied
#   on every connection after Rails' own `PRAGMA foreign_keys = ON`.
# Each transaction statement is logged as the contract names it (BEGIN DEFERRED|IMMEDIATE, COMMIT,
# ROLLBACK), where Rails 6.1 logs "begin transaction".
module LabSqliteProfiles
  def configure_connection
    super
    lab = Lab.config
    case lab.busy_kind
    when "retries"
      retries = lab.busy_arg
      @connection.busy_handler { |count| count <= retries }
    when "sleep_poll"
      limit = lab.busy_arg / 1000.0
      deadline = nil
      @connection.busy_handler do |count| # a strict boolean: the gem retries on nil
        now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        deadline = now + limit if count.zero?
        next false unless now < deadline

        sleep 0.001
        true
      end
    end
    lab.pragmas.each { |name, value| execute("PRAGMA #{name} = #{value}", "SCHEMA") }
  end

  def begin_db_transaction
    mode = Lab.config.txn_mode
    log("BEGIN #{mode.upcase}", "TRANSACTION") { @connection.transaction(mode.to_sym) }
  end

  def commit_db_transaction
    log("COMMIT", "TRANSACTION") { @connection.commit }
    reset_read_uncommitted
  end

  def exec_rollback_db_transaction
    log("ROLLBACK", "TRANSACTION") { @connection.rollback }
    reset_read_uncommitted
  end
end

ActiveSupport.on_load(:active_record_sqlite3adapter) { prepend LabSqliteProfiles }
