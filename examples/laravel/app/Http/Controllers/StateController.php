<?php

namespace App\Http\Controllers;

use App\Models\Message;
use App\Services\RequestNote;
use App\Services\StickyNote;
use App\Services\Tally;
use Illuminate\Http\Request;
use Illuminate\Support\Arr;
use Illuminate\Support\Facades\App;
use Illuminate\Support\Facades\DB;

/**
 * What a request finds left in its process when it begins: under php-fpm
 * always the same for a client without a session; under a warm worker
 * too, but for StickyNote (see docs/laravel.md).
 */
class StateController extends Controller
{
    public function show(Request $request, RequestNote $note, StickyNote $sticky, Tally $tally)
    {
        $tally->requests++;

        return [
            'user' => $request->user()->name ?? null,
            'session' => (object) Arr::except($request->session()->all(), ['_token', '_previous', '_flash']),
            'app_locale' => App::getLocale(),
            'config_locale' => config('app.locale'),
            'translator_locale' => app('translator')->getLocale(),
            'greeting' => __('messages.hello', ['name' => 'x']),
            'request_note' => $note->text,
            'sticky_note' => $sticky->text,
            'tally' => $tally->requests,
            'messages' => Message::count(),
            'transaction_level' => DB::transactionLevel(),
            'queued_cookies' => count(app('cookie')->getQueuedCookies()),
            'shared_view_data' => array_keys(array_diff_key(view()->getShared(), ['app' => 1, '__env' => 1])),
        ];
    }

    /** Writes everywhere a request can leave something, then shows it. */
    public function note(Request $request, string $text, RequestNote $note, StickyNote $sticky)
    {
        $note->text = $text;
        $sticky->text = $text;
        $request->session()->put('note', $text);
        App::setLocale('fr');
        app('cookie')->queue('note', $text, 10);
        view()->share('note', $text);

        return $this->show($request, $note, $sticky, app(Tally::class));
    }

    /** Begins a transaction, writes a message and never commits. */
    public function uncommitted(string $name)
    {
        DB::beginTransaction();
        Message::create(['name' => $name, 'body' => 'never committed']);

        return ['messages' => Message::count(), 'transaction_level' => DB::transactionLevel()];
    }
}
