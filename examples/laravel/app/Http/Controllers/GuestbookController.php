<?php

namespace App\Http\Controllers;

use App\Models\Message;
use Illuminate\Http\Request;

class GuestbookController extends Controller
{
    public function index()
    {
        return view('guestbook', ['messages' => Message::orderBy('id')->get()]);
    }

    public function store(Request $request)
    {
        // Invalid: back to the form, with the errors and the old input in
        // the session for the next page.
        $data = $request->validate([
            'name' => ['required', 'max:40'],
            'message' => ['required', 'min:3', 'max:200'],
        ]);
        Message::create(['name' => $data['name'], 'body' => $data['message']]);

        return redirect()->route('guestbook')->with('status', "Thank you, {$data['name']}.");
    }
}
