# frozen_string_literal: true

# Seed 002's items.
class Item < ApplicationRecord
end
