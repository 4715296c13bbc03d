# frozen_string_literal: true

# Seed 001's metrics: each measurement with the instance's previous value of that name.
class Metric < ApplicationRecord
  # The latest value of this instance's measurement, or nil.
  def self.latest(instance, name) = where(instance: instance, name: name).order(id: :desc).pick(:value)
end
