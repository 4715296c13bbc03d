# frozen_string_literal: true

# Seed 004's userinfo table. `bio` (what makes the row wide) is never read: the pages show four
# columns, as every stack's SELECT names them.
class User < ApplicationRecord
  self.primary_key = "uid"
  SHOWN = %i[uid username departname created].freeze

  def self.shown(uid) = select(*SHOWN).find_by(uid: uid)

  # One UPDATE, as the contract's: the new name and one more update; returns the rows changed.
  def self.rename(uid, departname)
    where(uid: uid).update_all(departname: departname, updates: Arel.sql("updates + 1"))
  end
end
