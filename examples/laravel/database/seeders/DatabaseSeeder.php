<?php

namespace Database\Seeders;

use App\Models\Message;
use App\Models\User;
use Illuminate\Database\Seeder;
use Illuminate\Support\Facades\Hash;

class DatabaseSeeder extends Seeder
{
    public function run()
    {
        User::create(['name' => 'Ann', 'email' => 'ann@example.com', 'password' => Hash::make('ann-secret')]);
        User::create(['name' => 'Bob', 'email' => 'bob@example.com', 'password' => Hash::make('bob-secret')]);
        Message::create(['name' => 'Bob', 'body' => 'First!']);
    }
}
